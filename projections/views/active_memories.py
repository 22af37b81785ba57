"""Active memories: the current state of every live memory (active or suppressed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, Unpack
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.ledger.results import MemoryRow
from domain.model.values import Scope
from projections import cursors
from projections.base import Projection
from projections.envelope import Envelope
from projections.rows import row_of
from projections.sealed import vacuum_promptly
from projections.tracking import Tables
from projections.views._memory_rows import (
    fold_memory_events,
    memory_table,
    open_memory_rows,
    seal_memory_rows,
)
from projections.views._rows import Column, ReadSource

__all__ = [
    "COLUMNS",
    "ActiveMemories",
    "Page",
    "PageQuery",
    "expired_count",
    "memories",
    "memories_by_id",
    "memory",
    "memory_by_key",
    "retrievable_memories",
]

TABLE = memory_table(Column("position", "int8"), created_at=True)
COLUMNS = TABLE.names


class ActiveMemories(Projection):
    """One row per live memory; a forgotten memory leaves none."""

    name = "active_memories"
    stores_positions = True

    def create(self, t: Tables) -> list[Composed]:
        table = t["active_memories"]
        return [
            TABLE.create(table),
            vacuum_promptly(table),
            t.create_index(
                "active_memories", "user_scope", "(user_id, scope_type, workspace_type)"
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = TABLE.changes(t["active_memories"], batch[0].partition)
        fold_memory_events(rows, batch, track_position=True)
        seal_memory_rows(rows, "active_memories", t.seal)
        rows.flush(cur)


# -- queries -----------------------------------------------------------------------------------

_MEMORY = SQL(", ").join(SQL(c) for c in ("memory_id", *COLUMNS))


def _all(src: ReadSource, query: Composed, params: tuple[Any, ...]) -> list[MemoryRow]:
    """The rows of `query`, their key and content opened."""
    rows = open_memory_rows(src.all(query, params), "active_memories", src.t.seal)
    return [row_of(MemoryRow, row) for row in rows]


@dataclass(frozen=True, slots=True)
class Page:
    """A page of rows and the cursor of the next page (None when done)."""

    items: list[MemoryRow]
    next_cursor: str | None


def _encode_cursor(created_at: datetime, memory_id: UUID) -> str:
    return cursors.encode(created_at.isoformat(), str(memory_id))


def _decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    def parse(values: list[Any]) -> tuple[datetime, UUID]:
        created_at, memory_id = values
        return datetime.fromisoformat(created_at), UUID(memory_id)

    return cursors.decode(cursor, parse)


def memory(src: ReadSource, user_id: str, memory_id: UUID) -> MemoryRow | None:
    """One live memory of the user, or None."""
    rows = _all(
        src,
        SQL("SELECT {} FROM {} WHERE partition = %s AND memory_id = %s AND user_id = %s").format(
            _MEMORY, src.t["active_memories"]
        ),
        (src.partition(user_id), memory_id, user_id),
    )
    return rows[0] if rows else None


class PageQuery(TypedDict, total=False):
    """What `memories` narrows a page to (each filter unset or None: any) and its size and start."""

    scope_type: str | None
    workspace_type: str | None
    status: str | None
    category: str | None
    limit: int
    """At most this many rows (default 50)."""
    cursor: str | None
    """The `next_cursor` of the page before (None: the first page)."""


_FILTERS = ("scope_type", "workspace_type", "status", "category")


def memories(src: ReadSource, user_id: str, **query: Unpack[PageQuery]) -> Page:
    """The user's live memories, oldest first, keyset-paginated."""
    where = [SQL("partition = %s AND user_id = %s")]
    params: list[Any] = [src.partition(user_id), user_id]
    for column in _FILTERS:
        value = query.get(column)
        if value is not None:
            where.append(SQL(f"{column} = %s"))
            params.append(value)
    cursor = query.get("cursor")
    if cursor:
        created_at, memory_id = _decode_cursor(cursor)
        where.append(SQL("(created_at, memory_id) > (%s, %s)"))
        params += [created_at, memory_id]
    limit = query.get("limit", 50)
    rows = _all(
        src,
        SQL("SELECT {} FROM {} WHERE {} ORDER BY created_at, memory_id LIMIT %s").format(
            _MEMORY, src.t["active_memories"], SQL(" AND ").join(where)
        ),
        (*params, limit + 1),
    )
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if more else None
    return Page(rows, _encode_cursor(last.created_at, last.memory_id) if last else None)


def expired_count(src: ReadSource) -> int:
    """How many live memories are past their expiry (a section 17 metric)."""
    rows = src.all(
        SQL("SELECT count(*) AS n FROM {} WHERE expires_at <= now()").format(
            src.t["active_memories"]
        ),
        (),
    )
    return int(rows[0]["n"])


def retrievable_memories(
    src: ReadSource,
    user_id: str,
    scopes: Sequence[Scope],
    *,
    now: datetime,
    limit: int = 1000,
) -> list[MemoryRow]:
    """The user's active, unexpired memories in these scopes, newest first (at most `limit`)."""
    if not scopes:
        return []
    in_scope = SQL(" OR ").join(
        SQL("(scope_type = %s AND workspace_type IS NOT DISTINCT FROM %s)") for _ in scopes
    )
    return _all(
        src,
        SQL(
            "SELECT {} FROM {} WHERE partition = %s AND user_id = %s AND status = 'active'"
            " AND (expires_at IS NULL OR expires_at > %s) AND ({})"
            " ORDER BY updated_at DESC, memory_id LIMIT %s"
        ).format(_MEMORY, src.t["active_memories"], in_scope),
        (
            src.partition(user_id),
            user_id,
            now,
            *(v for s in scopes for v in (s.scope_type, s.workspace_type)),
            limit,
        ),
    )


def memory_by_key(src: ReadSource, user_id: str, scope: Scope, memory_key: str) -> MemoryRow | None:
    """The live memory (active or suppressed) holding a normalised key in a scope, or None."""
    rows = _all(
        src,
        SQL(
            "SELECT {} FROM {} WHERE partition = %s AND user_id = %s AND scope_type = %s"
            " AND workspace_type IS NOT DISTINCT FROM %s AND key_hash = %s"
            " ORDER BY memory_id"
        ).format(_MEMORY, src.t["active_memories"]),
        (
            src.partition(user_id),
            user_id,
            scope.scope_type,
            scope.workspace_type,
            src.t.seal.user_hash(user_id, "key", memory_key),
        ),
    )
    # Equal hashes of unequal keys are all but impossible; the opened key says for sure.
    rows = [row for row in rows if row.memory_key == memory_key]
    return rows[0] if rows else None


def memories_by_id(src: ReadSource, user_id: str, memory_ids: Sequence[UUID]) -> list[MemoryRow]:
    """The user's live memories among `memory_ids`, in no particular order."""
    if not memory_ids:
        return []
    return _all(
        src,
        SQL(
            "SELECT {} FROM {} WHERE partition = %s AND user_id = %s AND memory_id = ANY(%s)"
        ).format(_MEMORY, src.t["active_memories"]),
        (src.partition(user_id), user_id, list(memory_ids)),
    )
