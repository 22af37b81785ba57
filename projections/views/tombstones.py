"""Tombstones: the minimum a forgotten memory leaves, so nothing can bring it back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.tracking import Tables
from projections.views._rows import ReadSource, copy_rows

__all__ = ["Tombstones", "is_forgotten"]


class Tombstones(Projection):
    """memory_id, user_id, deleted_at, final_revision of every forgotten memory."""

    name = "tombstones"

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid NOT NULL,"
                " user_id text NOT NULL,"
                " deleted_at timestamptz NOT NULL,"
                " final_revision integer NOT NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, memory_id))"
            ).format(t["tombstones"]),
            t.create_index("tombstones", "user", "(user_id)"),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows: dict[UUID, tuple[Any, ...]] = {}
        partition = batch[0].partition
        for e in batch:
            event = e.event
            if isinstance(event, Memory.Forgotten) and e.originator_id not in rows:
                rows[e.originator_id] = (
                    e.originator_id,
                    event.user_id,
                    event.deleted_at,
                    event.final_revision,
                    partition,
                )
        if rows:
            # A memory is forgotten once, and each event is applied once: no row exists yet.
            copy_rows(
                cur,
                t["tombstones"],
                ("memory_id", "user_id", "deleted_at", "final_revision", "partition"),
                ("uuid", "text", "timestamptz", "int4", "int4"),
                rows.values(),
            )


def is_forgotten(src: ReadSource, user_id: str, memory_id: UUID) -> bool:
    """True when the user forgot this memory (its tombstone is theirs)."""
    rows = src.all(
        SQL(
            "SELECT 1 AS x FROM {} WHERE partition = %s AND memory_id = %s AND user_id = %s"
        ).format(src.t["tombstones"]),
        (src.partition(user_id), memory_id, user_id),
    )
    return bool(rows)
