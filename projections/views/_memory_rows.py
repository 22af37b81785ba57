"""The live row of a memory, folded from its events: what active_memories and search_terms share.

Both keep one row per live memory with the same columns for its state (content, category,
scope, status, revision, times); `fold_memory_events` turns a batch of events into inserts,
partial updates and deletes of such rows in a `RowChanges`, and each projection adds its own
columns (active_memories: `created_at`, `position`; search_terms: the terms).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from projections.views._rows import Column, RowChanges

__all__ = ["MEMORY_ID", "STATE_BEFORE_CREATED", "STATE_FROM_UPDATED", "fold_memory_events"]

MEMORY_ID = Column("memory_id", "uuid")
STATE_BEFORE_CREATED = (
    Column("user_id", "text"),
    Column("memory_key", "text"),
    Column("content", "text"),
    Column("category", "text"),
    Column("scope_type", "text"),
    Column("workspace_type", "text", nullable=True),
    Column("source_type", "text"),
    Column("status", "text"),
    Column("revision", "int4"),
)
"""The state columns a row of a live memory starts with (active_memories then has `created_at`)."""
STATE_FROM_UPDATED = (
    Column("updated_at", "timestamptz"),
    Column("last_confirmed_at", "timestamptz", nullable=True),
    Column("review_after", "timestamptz", nullable=True),
    Column("expires_at", "timestamptz", nullable=True),
)
"""The state columns after them; each table keeps this order (a rebuild compares by position)."""


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
