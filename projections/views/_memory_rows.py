"""The live row of a memory, folded from its events: what active_memories and search_terms share.

Both keep one row per live memory with the same columns for its state (content, category,
scope, status, revision, times), laid out by `memory_table` with each projection's own
columns (active_memories: `created_at`, `position`; search_terms: the terms);
`fold_memory_events` turns a batch of events into inserts, partial updates and deletes of such
rows in a `RowChanges`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from projections.envelope import Envelope
from projections.memory_kinds import (
    CONFIRMED,
    CONTENT,
    CREATED,
    FORGOTTEN,
    MEMORY_KINDS,
    OTHER,
    RESTORED,
    SUPPRESSED,
)
from projections.sealed import RowSeal
from projections.views._rows import Column, RowChanges, TableLayout

__all__ = [
    "MEMORY_ID",
    "SEALED",
    "fold_memory_events",
    "memory_table",
    "open_memory_rows",
    "seal_memory_row",
    "seal_memory_rows",
]
SEALED = ("memory_key", "content")
"""The columns of a memory row sealed with the memory's data key."""

MEMORY_ID = Column("memory_id", "uuid")
_STATE_BEFORE_CREATED = (
    Column("user_id", "text"),
    Column("key_hash", "text"),
    Column("memory_key", "bytea"),
    Column("content", "bytea"),
    Column("category", "text"),
    Column("scope_type", "text"),
    Column("workspace_type", "text", nullable=True),
    Column("source_type", "text"),
    Column("status", "text"),
    Column("revision", "int4"),
)
"""The state columns a row of a live memory starts with (active_memories then has `created_at`).

`memory_key` and `content` hold `RowSeal.seal` bytes (`seal_memory_rows`), `key_hash` the
user-keyed hash of the key that equality lookups use; `open_memory_rows` reads them back."""
_STATE_FROM_UPDATED = (
    Column("updated_at", "timestamptz"),
    Column("last_confirmed_at", "timestamptz", nullable=True),
    Column("review_after", "timestamptz", nullable=True),
    Column("expires_at", "timestamptz", nullable=True),
)
"""The state columns after them; each table keeps this order (a rebuild compares by position)."""


def memory_table(*own: Column, created_at: bool = False) -> TableLayout:
    """The layout of a table of live memories: `memory_id`, the state columns (with
    `created_at` after `revision` when asked for), then the projection's `own` columns."""
    created = (Column("created_at", "timestamptz"),) if created_at else ()
    return TableLayout(MEMORY_ID, (*_STATE_BEFORE_CREATED, *created, *_STATE_FROM_UPDATED, *own))


def fold_memory_events(
    rows: RowChanges, batch: Sequence[Envelope], *, track_position: bool = False
) -> None:
    """Fold the batch's memory events into `rows` (other events are skipped).

    A created row holds every state column plus `created_at` and `position` (a projection
    whose table lacks them leaves them unwritten); with `track_position`, every change also
    sets `position`.
    """
    change, delete = rows.change, rows.delete
    for envelope in batch:
        event = envelope.event
        kind = MEMORY_KINDS(type(event))
        if kind == OTHER:
            continue  # not a memory event, or one this version does not know
        key = envelope.originator_id
        if kind == FORGOTTEN:
            delete(key)
            continue
        timestamp = event.timestamp
        if kind == CREATED:
            rows.insert(
                key,
                {
                    "user_id": event.user_id,
                    "key_hash": "",
                    "memory_key": event.memory_key,
                    "content": event.content,
                    "category": event.category,
                    "scope_type": event.scope_type,
                    "workspace_type": event.workspace_type,
                    "source_type": event.source_type,
                    "status": "active",
                    "revision": 1,
                    "created_at": timestamp,
                    "updated_at": timestamp,
                    "last_confirmed_at": None,
                    "review_after": event.review_after,
                    "expires_at": event.expires_at,
                    "position": envelope.position,
                },
            )
            continue
        values: dict[str, Any]
        if kind == CONTENT:
            values = {
                "content": event.content,
                "category": event.category,
                "revision": event.revision,
            }
        elif kind == CONFIRMED:
            values = {"last_confirmed_at": timestamp}
        elif kind == SUPPRESSED:
            values = {"status": "suppressed"}
        elif kind == RESTORED:
            values = {"status": "active"}
        else:  # SCHEDULE
            values = {"review_after": event.review_after, "expires_at": event.expires_at}
        values["updated_at"] = timestamp
        if track_position:
            values["position"] = envelope.position
        change(key, values)


def seal_memory_rows(rows: RowChanges, table: str, seal: RowSeal) -> None:
    """Seal the clear key and content `fold_memory_events` left in `rows` (call before flush);
    `table` is the logical name the sealed values are bound to."""
    for memory_id, row in rows.new.items():
        seal_memory_row(row, table, memory_id, seal)
    for memory_id, values in rows.updates.items():
        if "content" in values:
            values["content"] = seal.seal(table, memory_id, memory_id, "content", values["content"])


def seal_memory_row(row: dict[str, Any], table: str, memory_id: UUID, seal: RowSeal) -> None:
    """Seal one whole row's clear `memory_key` and `content` in place, and set `key_hash`."""
    row["key_hash"] = seal.user_hash(row["user_id"], "key", row["memory_key"])
    seal.seal_row(table, memory_id, memory_id, row, SEALED)


def open_memory_rows(rows: list[dict[str, Any]], table: str, seal: RowSeal) -> list[dict[str, Any]]:
    """Rows read from `table` with their key and content opened (REDACTED once shredded)."""
    for row in rows:
        row.pop("key_hash", None)
    return seal.open_rows(rows, table, "memory_id", SEALED)
