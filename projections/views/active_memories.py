"""Active memories: the current state of every live memory (active or suppressed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from projections.base import Projection
from projections.envelope import Envelope
from projections.tables import Tables
from projections.views._memory_rows import fold_memory_events
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
        fold_memory_events(rows, batch, track_position=True)
        rows.flush(cur)
