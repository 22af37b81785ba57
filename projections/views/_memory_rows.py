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
from projections.views._rows import RowChanges

__all__ = ["fold_memory_events"]


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
