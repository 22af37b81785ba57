"""The API's one way to read the views: `Reads(pool, schema, ledger.partition).memory(user_id,
memory_id)`, ...

Each method is one query function of the view that owns the table (projections/views/*.py).
Memories, versions and candidates come back typed (`MemoryRow`, `VersionRow`: projections/
rows.py; `CandidateState`), audit rows as the dicts their answers are made of. Callers wait
for the projections' positions beforehand (service/reading.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack
from uuid import UUID

from psycopg.rows import dict_row
from psycopg.sql import Composed
from psycopg_pool import ConnectionPool

from domain.ledger.results import CandidateState, MemoryRow
from domain.model.values import Scope
from projections.cursors import InvalidCursor
from projections.rows import VersionRow
from projections.tracking import Tables
from projections.views import (
    active_memories,
    audit_feed,
    audit_log,
    candidates,
    memory_versions,
    search_terms,
    tombstones,
    user_revisions,
)
from projections.views.active_memories import Page, PageQuery

__all__ = ["InvalidCursor", "Page", "PageQuery", "Reads"]


class Reads:
    """Queries over the live view tables (a `ReadSource`), one pooled connection per call."""

    def __init__(
        self,
        pool: ConnectionPool[Any],
        schema: str,
        partition_of: Callable[[str], int],
    ) -> None:
        self.pool = pool
        self.t = Tables(schema)
        self.partition_of = partition_of
        """The ledger partition of a user (`MemoryLedger.partition`): every read of a user's
        rows names it (`partition = %s`: on Citus, the shard holding them)."""

    def partition(self, user_id: str) -> int:
        """The ledger partition of the user (the `partition` of all their rows)."""
        return self.partition_of(user_id)

    def all(
        self, query: Composed, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """Every row of `query` as a dict."""
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)
            rows: list[dict[str, Any]] = cur.fetchall()
            return rows

    def each(
        self, statements: Sequence[tuple[Composed, Sequence[Any] | Mapping[str, Any]]]
    ) -> list[list[dict[str, Any]]]:
        """Every row of each (query, params) as dicts, one list per statement: sent together
        on one connection (one round trip), each answered on its own (on Citus, each
        statement of one partition runs on the one node holding it)."""
        if not statements:
            return []
        with self.pool.connection() as conn, conn.pipeline():
            cursors = []
            for query, params in statements:
                cur = conn.cursor(row_factory=dict_row)
                cur.execute(query, params)
                cursors.append(cur)
            return [cur.fetchall() for cur in cursors]

    def memory(self, user_id: str, memory_id: UUID) -> MemoryRow | None:
        """One live memory of the user, or None."""
        return active_memories.memory(self, user_id, memory_id)

    def memories(self, user_id: str, **query: Unpack[PageQuery]) -> Page:
        """The user's live memories, oldest first, keyset-paginated."""
        return active_memories.memories(self, user_id, **query)

    def memories_by_id(self, user_id: str, memory_ids: Sequence[UUID]) -> list[MemoryRow]:
        """The user's live memories among `memory_ids`, in no particular order."""
        return active_memories.memories_by_id(self, user_id, memory_ids)

    def memory_by_key(self, user_id: str, scope: Scope, memory_key: str) -> MemoryRow | None:
        """The live memory (active or suppressed) holding a normalised key in a scope, or None."""
        return active_memories.memory_by_key(self, user_id, scope, memory_key)

    def retrievable_memories(
        self, user_id: str, scopes: Sequence[Scope], *, now: datetime, limit: int = 1000
    ) -> list[MemoryRow]:
        """The user's active, unexpired memories in these scopes, newest first."""
        return active_memories.retrievable_memories(self, user_id, scopes, now=now, limit=limit)

    def expired_count(self) -> int:
        """How many live memories are past their expiry (a section 17 metric)."""
        return active_memories.expired_count(self)

    def is_forgotten(self, user_id: str, memory_id: UUID) -> bool:
        """True when the user forgot this memory (its tombstone is theirs)."""
        return tombstones.is_forgotten(self, user_id, memory_id)

    def versions(self, user_id: str, memory_id: UUID) -> list[VersionRow]:
        """Every revision of a live memory, ascending."""
        return memory_versions.versions(self, user_id, memory_id)

    def candidates(self, user_id: str, status: str) -> list[CandidateState]:
        """The user's candidates in one status, newest first."""
        return candidates.in_status(self, user_id, status)

    def audit(
        self,
        *,
        marks: Mapping[int, int],
        partitions: Sequence[int],
        limit: int,
        user_id: str | None = None,
        memory_id: UUID | None = None,
    ) -> tuple[list[dict[str, Any]], dict[int, int]]:
        """Audit rows after the marks, merged across partitions, and the marks after them
        (`audit_feed.page`)."""
        return audit_feed.page(
            self,
            marks=marks,
            partitions=partitions,
            limit=limit,
            user_id=user_id,
            memory_id=memory_id,
        )

    def changes(self, user_id: str, *, after: int, limit: int) -> list[dict[str, Any]]:
        """The user's memory and candidate changes after a position (`audit_log.changes`)."""
        return audit_log.changes(self, user_id, after=after, limit=limit)

    def forgotten_scope(self, user_id: str, memory_id: UUID) -> Scope | None:
        """The scope a memory of this user had when it was forgotten; None if not forgotten."""
        return audit_log.forgotten_scope(self, user_id, memory_id)

    def user_revision(self, user_id: str) -> int:
        """The user's memory revision (0 before any memory event)."""
        return user_revisions.user_revision(self, user_id)

    def next_shadow_expiry(
        self, user_id: str, scopes: Sequence[Scope], now: datetime
    ) -> datetime | None:
        """When the first of the user's visible, active workspace memories expires (or None)."""
        return search_terms.next_shadow_expiry(self, user_id, scopes, now)
