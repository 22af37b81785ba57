"""Tombstones: the minimum a forgotten memory leaves, so nothing can bring it back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.tables import Tables

__all__ = ["Tombstones"]


class Tombstones(Projection):
    """memory_id, user_id, deleted_at, final_revision of every forgotten memory."""

    name = "tombstones"
    tables = ("tombstones",)

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid PRIMARY KEY,"
                " user_id text NOT NULL,"
                " deleted_at timestamptz NOT NULL,"
                " final_revision integer NOT NULL)"
            ).format(t["tombstones"]),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id)").format(
                t.index("tombstones", "user"), t["tombstones"]
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = [
            (e.originator_id, e.event.user_id, e.event.deleted_at, e.event.final_revision)
            for e in batch
            if isinstance(e.event, Memory.Forgotten)
        ]
        if rows:
            cur.executemany(
                SQL(
                    "INSERT INTO {} (memory_id, user_id, deleted_at, final_revision)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (memory_id) DO NOTHING"
                ).format(t["tombstones"]),
                rows,
            )
