"""Active memories: the current state of every live memory (active or suppressed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from projections.base import Projection
from projections.envelope import Envelope
from projections.memory_kinds import CONFIRMED as _CONFIRMED
from projections.memory_kinds import CONTENT as _CONTENT
from projections.memory_kinds import CREATED as _CREATED
from projections.memory_kinds import FORGOTTEN as _FORGOTTEN
from projections.memory_kinds import MEMORY_KINDS as _KINDS
from projections.memory_kinds import OTHER as _OTHER
from projections.memory_kinds import RESTORED as _RESTORED
from projections.memory_kinds import SUPPRESSED as _SUPPRESSED
from projections.tables import Tables
from projections.views._rows import RowChanges

__all__ = ["COLUMNS", "ActiveMemories"]

COLUMNS = (
    "user_id",
    "memory_key",
    "content",
    "category",
    "scope_type",
    "workspace_type",
    "source_type",
    "status",
    "revision",
    "created_at",
    "updated_at",
    "last_confirmed_at",
    "review_after",
    "expires_at",
    "position",
)
TYPES = {
    "memory_id": "uuid",
    "user_id": "text",
    "memory_key": "text",
    "content": "text",
    "category": "text",
    "scope_type": "text",
    "workspace_type": "text",
    "source_type": "text",
    "status": "text",
    "revision": "int4",
    "created_at": "timestamptz",
    "updated_at": "timestamptz",
    "last_confirmed_at": "timestamptz",
    "review_after": "timestamptz",
    "expires_at": "timestamptz",
    "position": "int8",
}
"""Column types, as binary COPY needs them."""


class ActiveMemories(Projection):
    """One row per live memory; a forgotten memory leaves none."""

    name = "active_memories"
    tables = ("active_memories",)

    def create(self, t: Tables) -> list[Composed]:
        table = t["active_memories"]
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid PRIMARY KEY,"
                " user_id text NOT NULL,"
                " memory_key text NOT NULL,"
                " content text NOT NULL,"
                " category text NOT NULL,"
                " scope_type text NOT NULL,"
                " workspace_type text NULL,"
                " source_type text NOT NULL,"
                " status text NOT NULL,"
                " revision integer NOT NULL,"
                " created_at timestamptz NOT NULL,"
                " updated_at timestamptz NOT NULL,"
                " last_confirmed_at timestamptz NULL,"
                " review_after timestamptz NULL,"
                " expires_at timestamptz NULL,"
                " position bigint NOT NULL)"
            ).format(table),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, scope_type, workspace_type)").format(
                t.index("active_memories", "user_scope"), table
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = RowChanges(t["active_memories"], "memory_id", COLUMNS, TYPES)
        change, delete = rows.change, rows.delete
        for envelope in batch:
            event = envelope.event
            kind = _KINDS(type(event))
            if kind == _OTHER:
                continue  # not a memory event, or one this version does not know
            key = envelope.originator_id
            if kind == _FORGOTTEN:
                delete(key)
                continue
            timestamp = event.timestamp
            if kind == _CREATED:
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
            if kind == _CONTENT:
                values = {
                    "content": event.content,
                    "category": event.category,
                    "revision": event.revision,
                }
            elif kind == _CONFIRMED:
                values = {"last_confirmed_at": timestamp}
            elif kind == _SUPPRESSED:
                values = {"status": "suppressed"}
            elif kind == _RESTORED:
                values = {"status": "active"}
            else:  # _SCHEDULE
                values = {"review_after": event.review_after, "expires_at": event.expires_at}
            values["updated_at"] = timestamp
            values["position"] = envelope.position
            change(key, values)
        rows.flush(cur)
