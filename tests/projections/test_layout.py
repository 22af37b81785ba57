"""Tables laid out by an older release are found when tables are ensured, and projected again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections import layout
from projections.reads import Reads
from projections.registry import all_projections, main_projections
from projections.tracking import Tables, read_positions
from projections.views.embeddings import Embeddings
from projections.worker import ProjectionWorker, ensure_tables
from retrieval.hybrid import HybridSource
from retrieval.search import MemorySearch
from retrieval.vectors.service import EmbeddingService
from retrieval.vectors.store import VectorReads
from tests.retrieval.test_vector_matrix import DIM, Words


def _rows(database_url: str, schema: str, logical: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY 1").format(Tables(schema)[logical])
        ).fetchall()


def _positions(worker: ProjectionWorker) -> dict[str, int]:
    """Each projection's positions, its partitions' added up (a reset one: 0)."""
    with worker.pool.connection() as conn:
        stored = read_positions(conn, worker.tables)
    totals = {name: 0 for name, _ in stored}
    for (name, _), position in stored.items():
        totals[name] += position
    return totals


def _lay_out_as_before(worker: ProjectionWorker) -> None:
    """search_terms as the release before int8 term hashes made it (text[] terms)."""
    with worker.pool.connection() as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN terms TYPE text[] USING terms::text[]").format(
                worker.tables["search_terms"]
            )
        )


def test_an_older_layout_is_projected_again_and_nothing_else_is(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    for n in range(5):
        ledger.create_memory(
            "alice",
            scope=Scope.global_(),
            memory_key=f"k{n}",
            content=f"tea number {n}",
            category="fact",
        )
    worker.catch_up()
    before = {name: _rows(database_url, pg_schema, name) for name in ("search_terms", "audit_log")}
    positions = _positions(worker)

    ensure_tables(worker.pool, pg_schema, all_projections())  # the same release: nothing to do
    assert _positions(worker) == positions
    with worker.pool.connection() as conn:
        assert layout.stale(conn, all_projections(), worker.tables) == []

    _lay_out_as_before(worker)
    ensure_tables(worker.pool, pg_schema, all_projections())
    after = _positions(worker)
    assert after.get("search_terms", 0) == 0
    assert {k: v for k, v in after.items() if k != "search_terms"} == {
        k: v for k, v in positions.items() if k != "search_terms"
    }
    assert _rows(database_url, pg_schema, "search_terms") == []
    assert _rows(database_url, pg_schema, "audit_log") == before["audit_log"]

    worker.catch_up()
    assert _rows(database_url, pg_schema, "search_terms") == before["search_terms"]
    assert _positions(worker) == positions


def test_processes_starting_together_reset_an_older_layout_once(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="drink", content="tea", category="fact"
    )
    worker.catch_up()
    before = _rows(database_url, pg_schema, "search_terms")
    _lay_out_as_before(worker)
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def starting() -> None:
        try:
            start.wait()
            ensure_tables(worker.pool, pg_schema, all_projections())
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=starting) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with worker.pool.connection() as conn:
        assert layout.stale(conn, all_projections(), worker.tables) == []
    worker.catch_up()
    assert _rows(database_url, pg_schema, "search_terms") == before


def test_embeddings_laid_out_before_hubness_are_embedded_again_with_it(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
) -> None:
    service = EmbeddingService(Words())
    main, embedding = make_worker(main_projections()), make_worker([Embeddings(service)])
    for n in range(3):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{n}", content=f"tea {n}", category="fact"
        )
    main.catch_up()
    embedding.catch_up()
    before = _rows(database_url, pg_schema, "embeddings")
    with embedding.pool.connection() as conn:  # the release before: no hubness column
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP COLUMN hubness").format(embedding.tables["embeddings"])
        )

    ensure_tables(embedding.pool, pg_schema, [Embeddings(service)])
    assert _positions(embedding).get("embeddings", 0) == 0
    assert _rows(database_url, pg_schema, "embeddings") == []
    embedding.catch_up()

    after = _rows(database_url, pg_schema, "embeddings")
    assert after == before and all(row[-1] for row in after)  # every vector with its hubness
    reads = Reads(main.pool, pg_schema, main.ledger.partition)
    vectors = VectorReads(reads, None).user_vectors("alice", Words.model_id, DIM)
    assert vectors.hubness.shape == (3, 2)
    found = MemorySearch(None, vectors=HybridSource(service))(
        reads, "alice", "learning", "tea", now=datetime.now(UTC)
    )
    assert len(found.result.items) == 3


def test_a_process_probes_the_current_layout_once_and_still_finds_an_older_one(
    worker: ProjectionWorker, monkeypatch: Any
) -> None:
    """The columns each projection's DDL makes are read off probe tables once per process
    (a start-up on existing tables otherwise creates and rolls back every table again)."""
    projections = all_projections()
    probes: list[str] = []
    for projection in projections:
        create = projection.create

        def spy(t: Tables, create: Callable[[Tables], Any] = create) -> Any:
            if t.suffix.startswith("__probe"):
                probes.append(t.suffix)
            return create(t)

        monkeypatch.setattr(projection, "create", spy)
    with worker.pool.connection() as conn:
        assert layout.stale(conn, projections, worker.tables) == []  # probed here or earlier
        probes.clear()
        assert layout.stale(conn, projections, worker.tables) == []
        assert probes == []

        _lay_out_as_before(worker)
        found = layout.stale(conn, projections, worker.tables)

    assert [p.name for p in found] == ["search_terms"] and probes == []
