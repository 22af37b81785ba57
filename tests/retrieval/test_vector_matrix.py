"""Users' vector matrices in memory: the visibility rules, the key, forgets (real PostgreSQL)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import numpy as np
import pytest

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from domain.policy import visible_scopes
from projections.reads import Reads
from projections.registry import main_projections
from projections.views.embeddings import Embeddings
from projections.worker import ProjectionWorker
from retrieval.cache import read_revision
from retrieval.hybrid import HybridSource
from retrieval.search import MemorySearch
from retrieval.vectors import matrix_load
from retrieval.vectors.matrix_load import read_vector_key
from retrieval.vectors.service import EmbeddingService, Vectors, normalised
from retrieval.vectors.store import VectorReads
from tests.conftest import Clock
from tests.dumps import pg_dump

pytestmark = pytest.mark.integration
DIM = 64


def bag_of_words(text: str) -> list[float]:
    """A deterministic toy vector: each word hashed into one of DIM buckets."""
    vector = [0.0] * DIM
    for word in text.lower().replace(":", " ").split():
        vector[hashlib.sha256(word.encode()).digest()[0] % DIM] += 1.0
    return vector


class Words:
    """A fast, deterministic embedder for tests (cosine = shared words)."""

    model_id = "test/bag-of-words"

    def passages(self, texts: Sequence[str]) -> Vectors:
        return normalised([bag_of_words(t) for t in texts])

    def query(self, text: str) -> Vectors:
        return normalised(bag_of_words(text))


@pytest.fixture
def service() -> EmbeddingService:
    return EmbeddingService(Words())


@pytest.fixture
def workers(
    make_worker: Callable[..., ProjectionWorker], service: EmbeddingService
) -> tuple[ProjectionWorker, ProjectionWorker]:
    """The main worker and the embeddings projection's own (as `memledger serve` runs them)."""
    return make_worker(main_projections()), make_worker([Embeddings(service)], batch_size=4)


def create(ledger: MemoryLedger, key: str, content: str, **options: Any) -> UUID:
    options.setdefault("scope", Scope.global_())
    options.setdefault("category", "fact")
    outcome = ledger.create_memory(
        options.pop("user", "alice"), memory_key=key, content=content, **options
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def similar(
    reads: Reads, service: EmbeddingService, query: str, now: Any, **options: Any
) -> dict[UUID, float]:
    vector = service.query(query)
    assert vector is not None and service.model_id is not None
    found = VectorReads(reads, service.matrices).similar(
        options.pop("user", "alice"),
        visible_scopes(options.pop("workspace", "learning")),
        vector,
        model=service.model_id,
        now=now,
        limit=1000,
        **options,
    )
    assert set(found.similarity) == set(found.hubness) == set(found.pending)
    return found.similarity


def test_the_matrix_applies_the_rules_of_the_lexical_fetch(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    plain = create(ledger, "tea", "green tea in the morning")
    shadowed = create(ledger, "diet", "no meat")
    learning = create(ledger, "diet", "no meat, no fish", scope=Scope.workspace("learning"))
    teaching = create(ledger, "slides", "dark slides", scope=Scope.workspace("teaching"))
    expiring = create(ledger, "trip", "in Lisbon", expires_at=clock.now + timedelta(hours=1))
    goal = create(ledger, "exam", "pass the exam", category="goal")
    suppressed = create(ledger, "old", "an old habit")
    ledger.suppress_memory("alice", suppressed)
    create(ledger, "tea", "green tea", user="bob")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)

    assert set(similar(reads, service, "tea", clock.now)) == {plain, learning, expiring, goal}
    assert shadowed in similar(reads, service, "diet", clock.now, workspace="research")
    assert teaching in similar(reads, service, "slides", clock.now, workspace="teaching")
    assert set(similar(reads, service, "x", clock.now, category="goal")) == {goal}
    assert similar(reads, service, "x", clock.now, category="profile") == {}
    later = clock.now + timedelta(hours=2)  # no event: the cached matrix, checked against now
    assert set(similar(reads, service, "tea", later)) == {plain, learning, goal}
    assert service.matrices.state().hits >= 4


def test_one_load_per_change_and_a_forgotten_memory_is_never_scored(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    tea = create(ledger, "tea", "green tea in the morning")
    coffee = create(ledger, "coffee", "black coffee, no sugar")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    matrices = service.matrices

    assert set(similar(reads, service, "tea", clock.now)) == {tea, coffee}
    assert set(similar(reads, service, "coffee", clock.now)) == {tea, coffee}
    assert (matrices.state().loads, matrices.state().hits) == (1, 1)  # loaded once, then kept

    before = read_vector_key(reads, "alice")
    ledger.forget_memory("alice", tea)
    main.catch_up()  # the embeddings worker lags: the vector row is still there
    after = read_vector_key(reads, "alice")
    assert after.revision != before.revision  # the forget changed the key: the matrix is stale
    assert set(similar(reads, service, "tea", clock.now)) == {coffee}
    assert matrices.state().loads == 2

    embedding.catch_up()  # deletes the row, renews the stamp
    assert read_vector_key(reads, "alice").stamp != after.stamp
    with main.pool.connection() as conn:
        assert conn.execute(
            f"SELECT count(*) FROM {main.schema}.memledger_embeddings WHERE memory_id = %s",
            (tea,),
        ).fetchone() == (0,)
    assert set(similar(reads, service, "tea", clock.now)) == {coffee}


def test_a_vector_written_later_reaches_the_cached_matrix(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    create(ledger, "tea", "green tea in the morning")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    assert len(similar(reads, service, "tea", clock.now)) == 1

    milk = create(ledger, "milk", "oat milk in tea")
    main.catch_up()
    assert len(similar(reads, service, "tea", clock.now)) == 1  # no vector yet: lexical only
    embedding.catch_up()  # same memory revision, a new stamp: the matrix is loaded again
    assert milk in similar(reads, service, "tea", clock.now)


def test_hybrid_search_keeps_working_on_the_cached_matrix(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    for i in range(30):
        create(ledger, f"note_{i}", f"topic{i} word{i % 3}")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    engine = MemorySearch(None, vectors=HybridSource(service))
    cached = [engine(reads, "alice", "learning", f"topic{i}", now=clock.now) for i in range(5)]
    service.matrices.clear()
    fresh = [engine(reads, "alice", "learning", f"topic{i}", now=clock.now) for i in range(5)]
    assert [f.result for f in cached] == [f.result for f in fresh]
    assert all(f.result.items for f in fresh)
    loaded = VectorReads(reads, None).user_vectors("alice", Words.model_id, DIM)
    assert loaded.matrix.shape == (30, DIM)
    assert np.allclose(np.linalg.norm(loaded.matrix, axis=1), 1.0)


def test_a_forgotten_vector_is_nowhere_in_the_database_the_cache_or_the_logs(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
    database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    main, embedding = workers
    marker = uuid4().hex
    secret = create(ledger, "hobby", f"collecting {marker} stamps")
    create(ledger, "tea", "green tea")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    assert secret in similar(reads, service, "stamps", clock.now)  # its matrix is cached
    with main.pool.connection() as conn:
        row = conn.execute(
            f"SELECT vector FROM {main.schema}.memledger_embeddings WHERE memory_id = %s",
            (secret,),
        ).fetchone()
    assert row is not None
    trace = bytes(row[0])[:48].hex().encode()  # as pg_dump writes bytea
    assert trace in pg_dump(database_url, main.schema)

    ledger.forget_memory("alice", secret)
    main.catch_up()
    embedding.catch_up()
    cached = service.matrices.peek(main.schema, "alice", Words.model_id)
    assert cached is not None and secret not in cached.index  # its row removed at once
    assert secret not in similar(reads, service, "stamps", clock.now)
    assert trace not in pg_dump(database_url, main.schema)
    assert trace.decode() not in caplog.text and marker not in caplog.text


def _rows(vectors: Any) -> dict[UUID, tuple[int, bytes, bytes]]:
    return {
        m: (int(vectors.revisions[i]), vectors.matrix[i].tobytes(), vectors.hubness[i].tobytes())
        for m, i in vectors.index.items()
    }


def test_a_change_refreshes_the_cached_matrix_from_the_changed_rows_only(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main, embedding = workers
    notes = [create(ledger, f"note_{i}", f"topic{i} word{i % 3}") for i in range(8)]
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    cached = VectorReads(reads, service.matrices)
    assert service.model_id is not None
    before = cached.user_vectors("alice", service.model_id, DIM)
    added = create(ledger, "note_new", "topic new")
    ledger.update_memory("alice", notes[0], expected_revision=1, content="topic zero changed")
    ledger.suppress_memory("alice", notes[1])
    main.catch_up()
    embedding.catch_up()
    opened: list[UUID] = []
    real = matrix_load.open_vector
    monkeypatch.setattr(
        matrix_load,
        "open_vector",
        lambda seal, m, v, *column: opened.append(m) or real(seal, m, v, *column),
    )
    applied: list[UUID] = []
    merge = matrix_load.merged
    monkeypatch.setattr(
        matrix_load,
        "merged",
        lambda base, key, rows, *more: (
            applied.extend(r[0] for r in rows) or merge(base, key, rows, *more)
        ),
    )

    after = cached.user_vectors("alice", service.model_id, DIM)
    refreshed = sorted(set(opened))
    changed = sorted(applied)
    fresh = VectorReads(reads, None).user_vectors("alice", service.model_id, DIM)

    assert changed == sorted([added, notes[0], notes[1]])  # the other five rows were not read
    assert refreshed == sorted([added, notes[0]])  # nor any vector of an unchanged revision
    assert _rows(after) == _rows(fresh) and after.key == fresh.key
    assert notes[1] not in after.index and added in after.index and before.key != after.key


def test_a_forget_removes_its_row_from_the_cached_matrix_at_once(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    tea = create(ledger, "tea", "green tea in the morning")
    milk = create(ledger, "milk", "oat milk in tea")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    assert set(similar(reads, service, "tea", clock.now)) == {tea, milk}

    ledger.forget_memory("alice", tea)
    embedding.catch_up()  # the embeddings worker first: search_terms still has the row
    cached = service.matrices.peek(main.schema, "alice", Words.model_id)
    assert cached is not None and tea not in cached.index and milk in cached.index
    assert set(similar(reads, service, "tea", clock.now)) == {milk}
    main.catch_up()
    assert set(similar(reads, service, "tea", clock.now)) == {milk}
    loads = service.matrices.state().loads
    engine = MemorySearch(None, vectors=HybridSource(service))
    found = engine(reads, "alice", "learning", "green tea", now=clock.now, min_relevance=0.0)
    assert [i.row.memory_id for i in found.result.items] == [milk]
    assert service.matrices.state().loads == loads  # nothing changed since: no refresh


def test_a_forget_elsewhere_is_found_by_the_count_of_rows(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    make_worker: Callable[..., ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
) -> None:
    main, embedding = workers
    notes = [create(ledger, f"note_{i}", f"topic{i} tea") for i in range(5)]
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    assert set(similar(reads, service, "tea", clock.now)) == set(notes)

    ledger.forget_memory("alice", notes[2])
    main.catch_up()
    # another process's embeddings worker: this process's cache hears nothing
    make_worker([Embeddings(EmbeddingService(Words()))], batch_size=4).catch_up()
    assert set(similar(reads, service, "tea", clock.now)) == set(notes) - {notes[2]}
    cached = service.matrices.peek(main.schema, "alice", Words.model_id)
    assert cached is not None and notes[2] not in {*cached.index, *cached.present}


def test_a_forget_racing_a_refresh_never_reaches_the_cached_matrix(
    ledger: MemoryLedger,
    workers: tuple[ProjectionWorker, ProjectionWorker],
    service: EmbeddingService,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main, embedding = workers
    secret = create(ledger, "hobby", "collecting tea stamps")
    create(ledger, "tea", "green tea")
    main.catch_up()
    embedding.catch_up()
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    # dense candidates only: what the search returns comes from the matrix
    engine = MemorySearch(None, vectors=HybridSource(service), rows=lambda *_, **__: [])
    assert secret in similar(reads, service, "stamps", clock.now)
    ledger.update_memory("alice", secret, expected_revision=1, content="collecting old tea stamps")
    main.catch_up()
    embedding.catch_up()  # a change: the next search refreshes the matrix

    merge = matrix_load.merged

    def forget_meanwhile(*args: Any) -> Any:  # the rows are read: now the forget lands
        monkeypatch.setattr(matrix_load, "merged", merge)
        ledger.forget_memory("alice", secret)
        embedding.catch_up()
        main.catch_up()
        return merge(*args)

    monkeypatch.setattr(matrix_load, "merged", forget_meanwhile)
    found = engine(reads, "alice", "learning", "tea stamps", now=clock.now, min_relevance=0.0)
    assert found.result.items  # the other memory
    assert secret not in [i.row.memory_id for i in found.result.items]
    cached = service.matrices.peek(main.schema, "alice", Words.model_id)
    assert cached is not None and secret not in cached.index
    assert secret not in similar(reads, service, "stamps", clock.now)


def test_the_keys_read_the_projections_in_the_users_own_partition(
    ledger: MemoryLedger, workers: tuple[ProjectionWorker, ProjectionWorker]
) -> None:
    """Tracking has a row per partition: a user's keys compare the projections where that
    user's events are, as packed positions comparable with the rows'. Given the ledger's
    partition of a user (as the service is) they read that partition."""
    main, _ = workers
    users = ["alice", "bob", "carol", "dave"]  # some in other partitions than alice's
    for user in users:
        create(ledger, "tea", f"green tea for {user}", user=user)
    assert len({ledger.partition(user) for user in users}) > 1
    main.catch_up()
    for reads in (Reads(main.pool, main.schema, ledger.partition),):
        for user in users:
            head = ledger.position(user)
            key = read_vector_key(reads, user)
            assert (key.revisions_position, key.terms_position) == (head, head)
            assert key.may_serve and key.may_store
            snapshot = read_revision(reads, user)
            assert snapshot.may_serve and snapshot.may_store
