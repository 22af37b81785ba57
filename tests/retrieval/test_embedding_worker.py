"""The embeddings projection in its own worker: nothing waits for it, missing vectors get filled."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.app import create_app
from api.cli import app as cli
from api.metrics import Metrics
from api.services import Services
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import main_projections
from projections.tracking import Tables
from projections.views.embeddings import Embeddings, open_vector
from projections.worker import ProjectionWorker
from retrieval.vectors.matrix_load import read_vector_key
from retrieval.vectors.service import (
    EmbedderError,
    EmbeddingService,
    Vectors,
    from_bytes,
    passage_text,
)
from tests.polling import until
from tests.retrieval.test_vector_matrix import Words

pytestmark = pytest.mark.integration
SECRET = "test-secret-of-at-least-32-bytes-long!"


class Gated(Words):
    """Embeds only once `gate` is set (a slow model, or a remote endpoint that hangs)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def passages(self, texts: Sequence[str]) -> Vectors:
        self.waiting.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return super().passages(texts)


class Flaky(Words):
    """Fails while `down` is True."""

    down = True

    def passages(self, texts: Sequence[str]) -> Vectors:
        if self.down:
            raise EmbedderError("the endpoint is down")
        return super().passages(texts)


def create(ledger: MemoryLedger, key: str, content: str) -> UUID:
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key=key, content=content, category="fact"
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def vectors(worker: ProjectionWorker) -> dict[UUID, Any]:
    with worker.pool.connection() as conn:
        rows = conn.execute(
            f"SELECT memory_id, vector FROM {worker.schema}.memledger_embeddings"
        ).fetchall()
    seal = Tables(worker.schema).seal  # stored sealed with each memory's data key
    return {memory_id: open_vector(seal, memory_id, vector) for memory_id, vector in rows}


def test_a_slow_embedder_holds_back_neither_projections_nor_reads(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    embedder = Gated()
    service = EmbeddingService(embedder)
    main = make_worker(main_projections())
    embedding = make_worker([Embeddings(service)], batch_size=4)
    main.start()
    embedding.start()
    services = Services(
        ledger=ledger,
        reads=Reads(main.pool, main.schema, main.ledger.partition),
        metrics=Metrics(),
        jwt_secret=SECRET,
        worker=main,
        embeddings=service,
        embedding_worker=embedding,
    )
    token = {"Authorization": f"Bearer {mint_token(SECRET, 'alice', workspace='learning')}"}
    try:
        with TestClient(create_app(services, max_lag=0)) as client:
            created = client.post(
                "/me/core-memories",
                json={
                    "memory_key": "tea",
                    "content": "green tea",
                    "category": "preference",
                    "scope_type": "global",
                },
                headers=token,
            )
            assert created.status_code == 201, created.text
            assert embedder.waiting.wait(20)  # the embeddings worker is stuck in the embedder
            found = client.post(
                "/tools/search_core_memories", json={"query": "green tea"}, headers=token
            )  # read-your-writes waited for the main projections only
            assert found.status_code == 200, found.text
            assert [i["memory_key"] for i in found.json()["items"]] == ["tea"]
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text  # vectors late: still ready
            assert ready.json()["projection_lag"]["embeddings"] > 0
            assert ready.json()["projection_lag"]["search_terms"] == 0
            assert (
                'memledger_projection_lag{projection="embeddings"}' in client.get("/metrics").text
            )
            embedder.gate.set()
            assert until(lambda: all(v is not None for v in vectors(main).values()))
            assert until(lambda: embedding.status()[0].lag == 0)
    finally:
        embedder.gate.set()


def test_vectors_missing_while_the_embedder_failed_are_filled_without_a_rebuild(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    embedder = Flaky()
    service = EmbeddingService(embedder, retry_after=0)
    main = make_worker(main_projections())
    embedding = make_worker([Embeddings(service)], batch_size=4)
    kept = create(ledger, "tea", "green tea")
    changed = create(ledger, "editor", "Neovim")
    gone = create(ledger, "city", "Zürich")
    ledger.update_memory("alice", changed, expected_revision=1, content="VS Code")
    main.catch_up()
    embedding.catch_up()
    assert vectors(embedding) == {kept: None, changed: None, gone: None}  # stored, no vector
    ledger.forget_memory("alice", gone)
    main.catch_up()
    embedding.catch_up()
    assert embedding.backfill() == 0  # still failing: nothing filled, nothing lost
    reads = Reads(main.pool, main.schema, main.ledger.partition)
    before = read_vector_key(reads, "alice").stamp

    embedder.down = False
    embedding.start()  # the live loop backfills once caught up
    assert until(lambda: None not in vectors(embedding).values())
    stored = vectors(embedding)
    assert set(stored) == {kept, changed}  # the forgotten memory has no row at all
    expected = Words().passages([passage_text("editor", "VS Code")])  # its current content
    assert np.array_equal(from_bytes(stored[changed], expected.shape[1]), expected)
    assert read_vector_key(reads, "alice").stamp != before  # cached matrices are stale


def test_backfill_skips_what_it_cannot_embed_and_stops(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    main = make_worker(main_projections())
    ids = [create(ledger, f"note_{i}", f"memory {i}") for i in range(40)]
    off = make_worker([Embeddings(EmbeddingService(None))])
    off.catch_up()  # no main catch-up yet: search_terms has no content to embed from
    embedding = make_worker([Embeddings(EmbeddingService(Words()))])
    assert embedding.backfill() == 0
    main.catch_up()
    assert embedding.backfill() == 40  # two steps (32 + 8), then nothing left
    assert embedding.backfill() == 0
    assert all(vectors(embedding)[i] is not None for i in ids)


def test_projections_status_lists_the_embeddings_worker(
    ledger: MemoryLedger, database_url: str, pg_schema: str, master_key: str
) -> None:
    create(ledger, "tea", "green tea")
    env = {
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": pg_schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_MASTER_KEY_FILE": None,
        "MEMLEDGER_EMBEDDER": "off",
    }
    result = CliRunner().invoke(cli, ["projections", "status"], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names[-1] == "embeddings" and "search_terms" in names and len(set(names)) == len(names)
    assert all(line.split()[-1] == str(ledger.recorded()) for line in result.stdout.splitlines())
