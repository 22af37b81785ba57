"""Version history: one row per content revision of a live memory, for users to view and restore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.tables import Tables

__all__ = ["MemoryVersions"]

_CHANGE_TYPES = {
    Memory.Updated: "update",
    Memory.Replaced: "replace",
    Memory.VersionRestored: "restore",
}


class MemoryVersions(Projection):
    """Every revision's content; all rows of a memory vanish when it is forgotten."""

    name = "memory_versions"
    tables = ("memory_versions",)

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid NOT NULL,"
                " revision integer NOT NULL,"
                " user_id text NOT NULL,"
                " content text NOT NULL,"
                " category text NOT NULL,"
                " scope_type text NOT NULL,"
                " workspace_type text NULL,"
                " change_type text NOT NULL,"
                " changed_via text NOT NULL,"
                " source_candidate_id uuid NULL,"
                " created_at timestamptz NOT NULL,"
                " PRIMARY KEY (memory_id, revision))"
            ).format(t["memory_versions"])
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows: dict[tuple[Any, int], tuple[Any, ...]] = {}
        forgotten: set[Any] = set()
        for envelope in batch:
            event = envelope.event
            match event:
                case Memory.Created():
                    change_type, changed_via, source = (
                        "create",
                        event.changed_via,
                        event.source_candidate_id,
                    )
                    revision = 1
                case Memory.ContentChanged():
                    change_type = _CHANGE_TYPES.get(type(event), "update")
                    changed_via, source = event.changed_via, event.source_candidate_id
                    revision = event.revision
                case Memory.Forgotten():
                    forgotten.add(envelope.originator_id)
                    rows = {k: v for k, v in rows.items() if k[0] != envelope.originator_id}
                    continue
                case _:
                    continue
            rows[(envelope.originator_id, revision)] = (
                envelope.originator_id,
                revision,
                event.user_id,
                event.content,
                event.category,
                event.scope_type,
                event.workspace_type,
                change_type,
                changed_via,
                source,
                event.timestamp,
            )
        table = t["memory_versions"]
        if forgotten:
            cur.execute(
                SQL("DELETE FROM {} WHERE memory_id = ANY(%s)").format(table), (list(forgotten),)
            )
        if rows:
            cur.executemany(
                SQL(
                    "INSERT INTO {} (memory_id, revision, user_id, content, category, scope_type,"
                    " workspace_type, change_type, changed_via, source_candidate_id, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (memory_id, revision) DO NOTHING"
                ).format(table),
                list(rows.values()),
            )
