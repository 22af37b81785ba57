"""The views' statements on distributed tables (issue 27): what Citus refuses, and routing.

Every statement on one user's rows names the user's partition, so Citus runs it on the one
shard holding the partition (`Task Count: 1` in its plan): each read of `Reads` is recorded
and its plan checked. The audit feed used to read every partition in one statement (a LATERAL
join of the partitions' marks with both audit tables); Citus refuses it, whether the tables
are matched on `position & 1023` or on `partition` ("complex joins are only supported when all
distributed tables are co-located and joined on their distribution columns": the other side
is a function, not a distributed table), so the feed sends one statement per partition
(projections/views/audit_feed.py); this module pins that refusal.

Runs where the schema's views are distributed (tests/citus/conftest.py distributes each
test's schema on the cluster, and skips where Citus is absent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import ClientCursor
from psycopg.sql import SQL, Composed

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.tracking import Tables
from projections.views import (
    active_memories,
    audit_log,
    candidates,
    memory_versions,
    search_terms,
    tombstones,
    user_revisions,
)
from projections.worker import ProjectionWorker

pytestmark = [pytest.mark.integration, pytest.mark.citus]

_OLD_FEED = (
    "SELECT r.* FROM unnest(%(parts)s::int[], %(after)s::bigint[]) AS c(part, after)"
    " CROSS JOIN LATERAL (SELECT * FROM (SELECT position, 0 AS seq FROM {audit}"
    " WHERE {match} AND position > c.after UNION ALL SELECT position, seq FROM {changes}"
    " WHERE {match} AND position > c.after) AS u ORDER BY position, seq LIMIT 20) AS r"
)


def _distributed(database_url: str, schema: str) -> bool:
    with psycopg.connect(database_url) as conn:
        if conn.execute("SELECT to_regclass('pg_catalog.pg_dist_partition')").fetchone() == (None,):
            return False
        row = conn.execute(
            "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)",
            (f'"{schema}"."memledger_audit_log"',),
        ).fetchone()
        return row is not None


def _story(ledger: MemoryLedger, worker: ProjectionWorker) -> list[str]:
    users = [f"user-{i}" for i in range(6)]
    for user in users:
        ledger.create_memory(
            user, scope=Scope.global_(), memory_key="drink", content="green tea", category="fact"
        )
    worker.catch_up()
    assert len({ledger.partition(user) for user in users}) > 1
    return users


class _Recorded:
    """A ReadSource that records each statement instead of running it."""

    def __init__(self, t: Tables, ledger: MemoryLedger) -> None:
        self.t, self.ledger = t, ledger
        self.statements: list[tuple[Composed, Any]] = []

    def partition(self, user_id: str) -> int:
        return self.ledger.partition(user_id)

    def all(self, query: Composed, params: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        self.statements.append((query, params))
        return []

    def each(self, statements: Sequence[tuple[Composed, Any]]) -> list[list[Any]]:
        self.statements.extend(statements)
        return [[] for _ in statements]


def test_the_old_audit_feed_statement_is_refused_and_each_partitions_is_read(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    users = _story(ledger, worker)
    assert _distributed(database_url, pg_schema)  # tests/citus/conftest.py distributed it
    t = Tables(pg_schema)
    parts = sorted(ledger.heads())
    with psycopg.connect(database_url, autocommit=True) as conn:
        for match in ("(position & 1023) = c.part", "partition = c.part"):
            statement = SQL(_OLD_FEED.replace("{match}", match)).format(
                audit=t["audit_log"], changes=t["profile_changes"]
            )
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="complex joins"):
                conn.execute(statement, {"parts": parts, "after": [0] * len(parts)})
    reads = Reads(worker.pool, pg_schema, ledger.partition)
    rows, marks = reads.audit(marks={}, partitions=parts, limit=100)
    assert sorted(row["user_id"] for row in rows) == sorted(users)
    assert marks == {p: head for p, head in ledger.heads().items() if head}


def test_each_read_of_a_user_runs_on_one_shard(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    users = _story(ledger, worker)
    assert _distributed(database_url, pg_schema)  # tests/citus/conftest.py distributed it
    user = users[0]
    memory = Reads(worker.pool, pg_schema, ledger.partition).memories(user).items[0]
    src = _Recorded(Tables(pg_schema), ledger)
    scope, now = Scope.global_(), datetime.now(UTC)
    active_memories.memory(src, user, memory.memory_id)
    active_memories.memories(src, user, status="active")
    active_memories.memories_by_id(src, user, [memory.memory_id])
    active_memories.memory_by_key(src, user, scope, "drink")
    active_memories.retrievable_memories(src, user, [scope], now=now)
    tombstones.is_forgotten(src, user, memory.memory_id)
    memory_versions.versions(src, user, memory.memory_id)
    candidates.in_status(src, user, "pending")
    audit_log.changes(src, user, after=0, limit=10)
    audit_log.forgotten_scope(src, user, memory.memory_id)
    user_revisions.user_revision(src, user)
    search_terms.next_shadow_expiry(src, user, [Scope("workspace", "learning")], now)
    search_terms.owner_rows(src, user, {})
    assert len(src.statements) == 13
    with psycopg.connect(database_url, cursor_factory=ClientCursor) as conn:
        for query, params in src.statements:
            explained = b"EXPLAIN " + query.as_bytes(conn)
            plan = [row[0] for row in conn.cursor().execute(explained, params).fetchall()]
            tasks = [line.strip() for line in plan if "Task Count" in line]
            assert tasks == ["Task Count: 1"], (query.as_string(conn), plan)
