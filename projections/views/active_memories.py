"""Active memories: the current state of every live memory (active or suppressed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from projections.base import Projection
from projections.envelope import Envelope
from projections.tables import Tables
from projections.views._memory_rows import (
    MEMORY_ID,
    STATE_BEFORE_CREATED,
    STATE_FROM_UPDATED,
    fold_memory_events,
)
from projections.views._rows import Column, RowChanges, column_names, column_types, create_table

__all__ = ["COLUMNS", "ActiveMemories"]

TABLE = (
    *STATE_BEFORE_CREATED,
    Column("created_at", "timestamptz"),
    *STATE_FROM_UPDATED,
    Column("position", "int8"),
)
COLUMNS = column_names(TABLE)
TYPES = column_types(MEMORY_ID, TABLE)


class ActiveMemories(Projection):
    """One row per live memory; a forgotten memory leaves none."""

    name = "active_memories"
    tables = ("active_memories",)

    def create(self, t: Tables) -> list[Composed]:
        table = t["active_memories"]
        return [
            create_table(table, MEMORY_ID, TABLE),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, scope_type, workspace_type)").format(
                t.index("active_memories", "user_scope"), table
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = RowChanges(t["active_memories"], "memory_id", COLUMNS, TYPES)
        fold_memory_events(rows, batch, track_position=True)
        rows.flush(cur)
