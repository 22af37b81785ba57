"""Locks held by other sessions, against a real server: a view's table locked while the
server serves writes and reads of them, and a rebuild killed (kill -9) twice while it waits
for a lock, whose tables the next start drops.

Each scenario checks what test_outages.py checks (no 500, answered within the deadline, the
projections equal to a fresh rebuild at the end), over its own PostgreSQL cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.faults.cluster import PrivateCluster
from tests.faults.harness import (
    Call,
    FaultServer,
    check_calls,
    create,
    projections_rebuilt,
    timed,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

TRACKING = "memledger_projection_tracking"


@contextmanager
def locked(cluster: PrivateCluster, schema: str, table: str) -> Iterator[psycopg.Connection[Any]]:
    """`table` ACCESS EXCLUSIVE-locked by another session for the block."""
    with psycopg.connect(cluster.url) as other:
        other.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, table))
        )
        try:
            yield other
        finally:
            other.rollback()


def query(cluster: PrivateCluster, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def rebuild_tables(cluster: PrivateCluster, schema: str) -> set[str]:
    """The tables of rebuilds (`__r` and 8 hex digits) in the schema."""
    rows = query(
        cluster,
        "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND relkind = 'r' AND relname ~ '__r[0-9a-f]{8}$'",
        schema,
    )
    return {row[0] for row in rows}


def waiting_for(cluster: PrivateCluster, schema: str, table: str) -> set[int]:
    """The server processes of the sessions waiting for a lock on `table`."""
    rows = query(
        cluster,
        "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE NOT l.granted AND n.nspname = %s AND c.relname = %s",
        schema,
        table,
    )
    return {row[0] for row in rows}


def alive(cluster: PrivateCluster, pids: set[int]) -> bool:
    rows = query(cluster, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", list(pids))
    return bool(rows[0][0])


def caught_up(cluster: PrivateCluster, schema: str) -> bool:
    """Every projection that tracks a partition at the head of every partition."""
    behind = query(
        cluster,
        f'SELECT count(*) FROM "{schema}".memledger_ledger_heads h'
        f' CROSS JOIN (SELECT DISTINCT projection FROM "{schema}".{TRACKING}) p'
        f' LEFT JOIN "{schema}".{TRACKING} t'
        "  ON t.projection = p.projection AND t.partition = h.partition"
        " WHERE coalesce(t.position, 0) < h.position",
    )
    return behind[0][0] == 0


def test_a_locked_view_table_holds_back_only_itself(
    make_server: Callable[..., FaultServer],
    cluster: PrivateCluster,
    fault_schema: str,
    master_key: str,
) -> None:
    server = make_server()
    server.start()
    calls: list[Call] = []
    with server.client("writer0") as client:
        assert create(client)[0].status == 201
        with locked(cluster, fault_schema, "memledger_search_terms"):
            for _ in range(8):  # each write read back: active_memories and tombstones only
                call, body = create(client)
                calls.append(call)
                assert call.status == 201, (call, body)
                read = timed(client, "GET", f"/me/core-memories/{body['memory_id']}")[0]
                calls.append(read)
                assert read.status == 200, read
                calls.append(timed(client, "GET", "/me/core-memories", params={"limit": 5})[0])
            # A search reads the index: it waits.
            with server.client("writer0", workspace="learning") as tools:
                searched = timed(
                    tools, "POST", "/tools/search_core_memories", json={"query": "fact"}
                )[0]
            calls.append(searched)
            assert searched.status == 503, searched  # in time, never served stale
        until(lambda: caught_up(cluster, fault_schema), timeout=30)  # the lock gone
    check_calls(calls)
    assert {c.status for c in calls if c.method == "GET"} == {200}
    server.stop()
    projections_rebuilt(cluster.url, fault_schema, master_key)


def test_a_rebuild_killed_twice_leaves_no_tables_after_the_next_start(
    make_server: Callable[..., FaultServer],
    cluster: PrivateCluster,
    fault_schema: str,
    master_key: str,
) -> None:
    server = make_server()
    server.start()
    with server.client("writer0") as client:
        for _ in range(5):
            assert create(client)[0].status == 201
    until(lambda: caught_up(cluster, fault_schema), timeout=30)
    server.stop()
    left: list[set[str]] = []
    # Both rebuilds fill their tables, then wait at the swap for the tracking table's lock.
    with locked(cluster, fault_schema, TRACKING):
        for _ in range(2):
            rebuilding = make_server("projections", "rebuild", "active_memories", "search_terms")
            rebuilding.start(ready=False)
            until(lambda: bool(waiting_for(cluster, fault_schema, TRACKING)), timeout=120)
            pids = waiting_for(cluster, fault_schema, TRACKING)
            left.append(rebuild_tables(cluster, fault_schema))
            rebuilding.kill()  # kill -9, at the swap
            # Its server session ends once its wait does (MEMLEDGER_LOCK_TIMEOUT).
            until(lambda p=pids: not alive(cluster, p), timeout=60)
    first, second = left
    assert first and second and not first & second, left  # the second dropped the first's
    assert rebuild_tables(cluster, fault_schema) == second
    server.start()  # the next start drops the second's
    assert rebuild_tables(cluster, fault_schema) == set()
    server.stop()
    projections_rebuilt(cluster.url, fault_schema, master_key)
