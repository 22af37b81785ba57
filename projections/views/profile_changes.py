"""Profile changes: the `memory.projection_created` / `memory.projection_removed` audit rows.

Section 17 asks the audit trail to show when a memory starts or stops feeding the derived
profile. The profile projection (projections/views/profile.py) knows, event by event, which
profile fields each memory produces; `ProfileDiff` turns the before/after of one event into
rows of the `profile_changes` table, which the audit API interleaves with `audit_log` (same
position as the ledger event that caused them, `seq` 1.. after it).

A field a memory starts producing, or produces with a new value, is `projection_created`; one
it stops producing (content changed, suppressed) is `projection_removed`. Rows hold ids, scope,
revision and time only: never the field's value, which is derived personal data. Changes are
computed per event, never per batch, so a live run and a rebuild (different batch sizes) write
the very same rows; a derived event id (uuid5 of the ledger event's id and the change) keeps
them stable across rebuilds.

Forgetting a memory deletes its rows. They were derived from content that is now shredded: a
rebuild can no longer derive them (it sees redacted content), so keeping them would make the
trail depend on when it was built, and they would keep saying which profile fields the
forgotten content stated. The ledger's own `memory.deleted` row stays in the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from uuid import UUID, uuid5

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from projections.envelope import Envelope
from projections.tracking import Tables
from projections.views._rows import copy_rows

__all__ = ["CREATED", "REMOVED", "TABLE", "ProfileDiff", "create_statements"]

TABLE: Final = "profile_changes"
CREATED: Final = "memory.projection_created"
REMOVED: Final = "memory.projection_removed"

_COLUMNS = (
    "position",
    "seq",
    "event_id",
    "event_type",
    "memory_id",
    "user_id",
    "scope_type",
    "workspace_type",
    "revision",
    "occurred_at",
    "request_id",
    "partition",
)
_TYPES = (
    "int8",
    "int2",
    "uuid",
    "text",
    "uuid",
    "text",
    "text",
    "text",
    "int4",
    "timestamptz",
    "text",
    "int4",
)


def create_statements(t: Tables) -> list[Composed]:
    """The table and its indexes (by user and by memory, like audit_log's)."""
    table = t[TABLE]
    return [
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " position bigint NOT NULL,"
            " seq smallint NOT NULL,"
            " event_id uuid NOT NULL,"
            " event_type text NOT NULL,"
            " memory_id uuid NOT NULL,"
            " user_id text NOT NULL,"
            " scope_type text NOT NULL,"
            " workspace_type text NULL,"
            " revision integer NULL,"
            " occurred_at timestamptz NULL,"
            " request_id text NULL,"
            " partition int NOT NULL,"
            " PRIMARY KEY (partition, position, seq))"
        ).format(table),
        t.create_index(TABLE, "user", "(user_id, position)"),
        t.create_index(TABLE, "memory", "(memory_id, position)"),
        # Before the partition column, the audit feed read this; the primary key serves now.
        SQL("DROP INDEX IF EXISTS {}.{}").format(Identifier(t.schema), t.index(TABLE, "partition")),
    ]


class ProfileDiff:
    """Collects the audit rows of one batch, one event at a time, and writes them at the end."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self._rows: list[tuple[Any, ...]] = []
        self._forgotten: set[UUID] = set()

    def forget(self, memory_id: UUID) -> None:
        """The memory is forgotten: none of its rows, stored or from this batch, remain."""
        self._forgotten.add(memory_id)

    def record(
        self,
        envelope: Envelope,
        owner: tuple[str, str, str | None],
        before: Mapping[str, str],
        after: Mapping[str, str],
    ) -> None:
        """The rows of one event that turned the effective fields `before` into `after`.

        Effective fields are those the memory feeds the profile with: none while suppressed.
        """
        if before == after:
            return
        changes = [
            (REMOVED if name not in after else CREATED, name)
            for name in sorted(before.keys() | after.keys())
            if before.get(name) != after.get(name)
        ]
        user_id, scope_type, workspace_type = owner
        event = envelope.event
        cause = envelope.event_id
        for seq, (change, name) in enumerate(changes, start=1):
            self._rows.append(
                (
                    envelope.position,
                    seq,
                    derived_event_id(cause, change, name),
                    change,
                    envelope.originator_id,
                    user_id,
                    scope_type,
                    workspace_type,
                    getattr(event, "revision", None),
                    envelope.timestamp,
                    envelope.request_id,
                    self.partition,
                )
            )

    def write(self, cur: Cursor[Any], t: Tables) -> None:
        """Delete the rows of forgotten memories, then add this batch's (one statement each)."""
        if self._forgotten:
            cur.execute(
                SQL("DELETE FROM {} WHERE partition = %s AND memory_id = ANY(%s)").format(t[TABLE]),
                (self.partition, list(self._forgotten)),
            )
            self._rows = [r for r in self._rows if r[4] not in self._forgotten]
        if self._rows:
            copy_rows(cur, t[TABLE], _COLUMNS, _TYPES, self._rows)
        self._rows, self._forgotten = [], set()


def derived_event_id(cause: UUID, change: str, field: str) -> UUID:
    """A stable id for one derived change of one ledger event."""
    return uuid5(cause, f"{change}:{field}")
