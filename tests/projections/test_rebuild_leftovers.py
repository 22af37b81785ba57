"""The tables of a rebuild that did not finish are dropped at the next start and the next
rebuild, never while their rebuild still runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.rebuild import rebuild
from projections.rebuild.leftovers import claimed, drop_leftovers, leftovers, new_suffix
from projections.registry import all_projections, select
from projections.tracking import Tables
from projections.worker import ProjectionWorker, ensure_tables


def left_by_a_killed_rebuild(conn: psycopg.Connection[Any], schema: str) -> str:
    """Fresh tables as a rebuild makes them, and no session holding their lock."""
    t = Tables(schema, new_suffix())
    with conn.transaction():
        for projection in select(["active_memories", "search_terms"]):
            for statement in projection.create(t):
                conn.execute(statement)
    return t.suffix


def test_the_next_start_and_the_next_rebuild_drop_what_killed_rebuilds_left(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
    )
    worker = make_worker()
    worker.catch_up()
    with psycopg.connect(database_url, autocommit=True) as conn:
        first, second = (left_by_a_killed_rebuild(conn, pg_schema) for _ in range(2))
        assert set(leftovers(conn, pg_schema)) == {first, second}
        ensure_tables(worker.pool, pg_schema, all_projections())  # the next start
        assert leftovers(conn, pg_schema) == {}
        third = left_by_a_killed_rebuild(conn, pg_schema)
        assert rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=1).identical
        assert third not in leftovers(conn, pg_schema)  # the next rebuild: its own gone too
        assert leftovers(conn, pg_schema) == {}


def test_a_running_rebuilds_tables_are_left_alone(database_url: str, pg_schema: str) -> None:
    with (
        ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool,
        psycopg.connect(database_url, autocommit=True) as running,
        psycopg.connect(database_url, autocommit=True) as other,
    ):
        ensure_tables(pool, pg_schema, all_projections())
        suffix = new_suffix()
        with claimed(running, pg_schema, suffix):
            t = Tables(pg_schema, suffix)
            with running.transaction():
                for statement in select(["tombstones"])[0].create(t):
                    running.execute(statement)
            assert drop_leftovers(other, pg_schema) == []
            assert set(leftovers(other, pg_schema)) == {suffix}
        assert drop_leftovers(other, pg_schema) == [t.name("tombstones")]
