"""Active memories: the current state of every live memory (active or suppressed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
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
        rows = RowChanges(t["active_memories"], "memory_id", COLUMNS)
        for envelope in batch:
            event, key = envelope.event, envelope.originator_id
            common = {"updated_at": envelope.timestamp, "position": envelope.position}
            match event:
                case Memory.Created():
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
                            "created_at": event.timestamp,
                            "last_confirmed_at": None,
                            "review_after": event.review_after,
                            "expires_at": event.expires_at,
                            **common,
                        },
                    )
                case Memory.ContentChanged():
                    rows.update(
                        key,
                        content=event.content,
                        category=event.category,
                        revision=event.revision,
                        **common,
                    )
                case Memory.Confirmed():
                    rows.update(key, last_confirmed_at=event.timestamp, **common)
                case Memory.Suppressed():
                    rows.update(key, status="suppressed", **common)
                case Memory.Restored():
                    rows.update(key, status="active", **common)
                case Memory.ScheduleChanged():
                    rows.update(
                        key, review_after=event.review_after, expires_at=event.expires_at, **common
                    )
                case Memory.Forgotten():
                    rows.delete(key)
                case _:
                    pass  # not a memory event, or one this version does not know
        rows.flush(cur)
