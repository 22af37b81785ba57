"""Version history: one row per content revision of a live memory, for users to view and restore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope, EventKinds
from projections.rows import VersionRow
from projections.sealed import vacuum_promptly
from projections.tracking import Tables
from projections.views._rows import ReadSource, copy_rows

__all__ = ["MemoryVersions", "versions"]


class MemoryVersions(Projection):
    """Every revision's content; all rows of a memory vanish when it is forgotten."""

    name = "memory_versions"

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid NOT NULL,"
                " revision integer NOT NULL,"
                " user_id text NOT NULL,"
                " content bytea NOT NULL,"
                " category text NOT NULL,"
                " scope_type text NOT NULL,"
                " workspace_type text NULL,"
                " change_type text NOT NULL,"
                " changed_via text NOT NULL,"
                " source_candidate_id uuid NULL,"
                " created_at timestamptz NOT NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, memory_id, revision))"
            ).format(t["memory_versions"]),
            vacuum_promptly(t["memory_versions"]),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        # (memory_id, revision) -> (index in the batch, row); memory_id -> its last Forgotten.
        rows: dict[tuple[UUID, int], tuple[int, tuple[Any, ...]]] = {}
        forgotten: dict[UUID, int] = {}
        partition = batch[0].partition
        for index, envelope in enumerate(batch):
            event = envelope.event
            kind = _KINDS(type(event))
            if kind is None:
                continue  # no version: another event, or one this version does not know
            memory_id = envelope.originator_id
            if kind == "forget":
                forgotten[memory_id] = index
                continue
            revision = 1 if kind == "create" else event.revision
            rows[(memory_id, revision)] = (
                index,
                (
                    memory_id,
                    revision,
                    event.user_id,
                    event.content,
                    event.category,
                    event.scope_type,
                    event.workspace_type,
                    kind,
                    event.changed_via,
                    event.source_candidate_id,
                    event.timestamp,
                    partition,
                ),
            )
        table = t["memory_versions"]
        seal = t.seal
        for (memory_id, revision), (index, row) in rows.items():
            sealed = seal.seal(_TABLE, f"{memory_id}/{revision}", memory_id, "content", row[3])
            rows[(memory_id, revision)] = (index, (*row[:3], sealed, *row[4:]))
        if forgotten:
            cur.execute(
                SQL("DELETE FROM {} WHERE partition = %s AND memory_id = ANY(%s)").format(table),
                (partition, list(forgotten)),
            )
        if rows:
            # A version row is made once per event, and each event is applied once: no row
            # can exist yet (but those of a memory forgotten later in the batch are dropped).
            copy_rows(
                cur,
                table,
                _COLUMNS,
                _TYPES,
                (row for index, row in rows.values() if forgotten.get(row[0], -1) < index),
            )


_TABLE = "memory_versions"
_COLUMNS = (
    "memory_id",
    "revision",
    "user_id",
    "content",
    "category",
    "scope_type",
    "workspace_type",
    "change_type",
    "changed_via",
    "source_candidate_id",
    "created_at",
    "partition",
)
_TYPES = (
    "uuid",
    "int4",
    "text",
    "bytea",
    "text",
    "text",
    "text",
    "text",
    "text",
    "uuid",
    "timestamptz",
    "int4",
)
_KINDS: EventKinds[str | None] = EventKinds(
    (
        (Memory.Created, "create"),
        (Memory.Updated, "update"),
        (Memory.Replaced, "replace"),
        (Memory.VersionRestored, "restore"),
        (Memory.ContentChanged, "update"),
        (Memory.Forgotten, "forget"),
    ),
    None,
)
"""The change type an event class makes ("forget" for Forgotten; None: no version)."""


def versions(src: ReadSource, user_id: str, memory_id: UUID) -> list[VersionRow]:
    """Every revision of a live memory, ascending (shredded content reads as REDACTED)."""
    rows = src.all(
        SQL(
            "SELECT revision, content, category, scope_type, workspace_type, change_type,"
            " changed_via, source_candidate_id, created_at FROM {}"
            " WHERE partition = %s AND memory_id = %s AND user_id = %s ORDER BY revision"
        ).format(src.t["memory_versions"]),
        (src.partition(user_id), memory_id, user_id),
    )
    seal = src.t.seal
    for row in rows:
        row_id = f"{memory_id}/{row['revision']}"
        row["content"] = seal.open(_TABLE, row_id, memory_id, "content", row["content"])
    return [VersionRow.of(row) for row in rows]
