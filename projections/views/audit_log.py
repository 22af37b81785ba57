"""Audit log: one row per ledger event, with ids, scope, revision and a keyed hash, never content.

`content_hash` is the HMAC of the normalised content under the memory's own data key, so once
the memory is forgotten (its key destroyed) no guess can ever be checked against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.model.access import AccessRecord
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from domain.model.values import Scope
from projections.base import Projection
from projections.envelope import Envelope, EventKinds, event_id
from projections.tracking import Tables
from projections.views._rows import ReadSource, copy_rows
from projections.views.profile_rules import FIELDS

__all__ = [
    "CHANGE_TYPES",
    "EVENT_TYPES",
    "MAX_CHANGES",
    "AuditLog",
    "changes",
    "event_type",
    "forgotten_scope",
]

EVENT_TYPES: Final[dict[type, str]] = {
    Memory.Created: "memory.created",
    Memory.Updated: "memory.updated",
    Memory.Replaced: "memory.updated",
    Memory.VersionRestored: "memory.version_restored",
    Memory.Confirmed: "memory.confirmed",
    Memory.ScheduleChanged: "memory.updated",
    Memory.Suppressed: "memory.suppressed",
    Memory.Restored: "memory.restored",
    Memory.Forgotten: "memory.deleted",
    MemoryCandidate.Proposed: "memory.candidate_created",
    MemoryCandidate.Accepted: "memory.candidate_accepted",
    MemoryCandidate.Rejected: "memory.candidate_rejected",
    MemoryCandidate.Expired: "memory.candidate_expired",
    MemorySettings.Created: "memory.settings_changed",
    MemorySettings.Changed: "memory.settings_changed",
    MemorySettings.Erased: "memory.settings_erased",
    AccessRecord.MemoryRead: "memory.read",
    AccessRecord.MemorySearched: "memory.search",
    AccessRecord.PolicyDenied: "memory.policy_denied",
}
"""Section 17's names; restore from suppression and version restore are named apart."""


def event_type(envelope: Envelope) -> str:
    """The audit name of a ledger event (`unknown` for one this version cannot read)."""
    return _KINDS(type(envelope.event))[0]


_MEMORY, _CANDIDATE, _OTHER = range(3)


def _family(cls: type) -> int:
    if issubclass(cls, Memory.Event):
        return _MEMORY
    return _CANDIDATE if issubclass(cls, MemoryCandidate.Event) else _OTHER


_KINDS = EventKinds(
    (
        *((cls, (name, _family(cls))) for cls, name in EVENT_TYPES.items()),
        (Memory.Event, ("unknown", _MEMORY)),
        (MemoryCandidate.Event, ("unknown", _CANDIDATE)),
    ),
    ("unknown", _OTHER),
)
"""An event class's audit name and family (where its memory id and scope are found)."""


def _row(e: Envelope) -> tuple[Any, ...]:
    event = e.event
    name, family = _KINDS(type(event))
    if family == _MEMORY:
        memory_id, candidate_id = e.originator_id, None
        scope_type = getattr(event, "scope_type", None)
        workspace_type = getattr(event, "workspace_type", None)
    elif family == _CANDIDATE:
        candidate_id = e.originator_id
        memory_id = getattr(event, "target_memory_id", None) or getattr(
            event, "resulting_memory_id", None
        )
        scope_type = getattr(event, "proposed_scope_type", None)
        workspace_type = getattr(event, "proposed_workspace_type", None)
    else:  # settings events, access records (AccessRecord says which memory, if any)
        memory_id, candidate_id = getattr(event, "memory_id", None), None
        scope_type = getattr(event, "scope_type", None)
        workspace_type = getattr(event, "workspace_type", None)
    return (
        e.position,
        event_id(e.originator_id, e.version),
        name,
        e.topic,
        memory_id,
        candidate_id,
        getattr(event, "user_id", None),
        scope_type,
        workspace_type,
        getattr(event, "revision", None),
        getattr(event, "content_hash", None),
        getattr(event, "timestamp", None),
        getattr(event, "request_id", None),
        e.partition,
    )


_COLUMNS = (
    "position",
    "event_id",
    "event_type",
    "topic",
    "memory_id",
    "candidate_id",
    "user_id",
    "scope_type",
    "workspace_type",
    "revision",
    "content_hash",
    "occurred_at",
    "request_id",
    "partition",
)
_TYPES = (
    "int8",
    "uuid",
    "text",
    "text",
    "uuid",
    "uuid",
    "text",
    "text",
    "text",
    "int4",
    "text",
    "timestamptz",
    "text",
    "int4",
)


class AuditLog(Projection):
    """Security trail of the ledger (versions, not audit, are where content may be seen)."""

    name = "audit_log"
    stores_positions = True

    def create(self, t: Tables) -> list[Composed]:
        table = t["audit_log"]
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " position bigint NOT NULL,"
                " event_id uuid NOT NULL,"
                " event_type text NOT NULL,"
                " topic text NOT NULL,"
                " memory_id uuid NULL,"
                " candidate_id uuid NULL,"
                " user_id text NULL,"
                " scope_type text NULL,"
                " workspace_type text NULL,"
                " revision integer NULL,"
                " content_hash text NULL,"
                " occurred_at timestamptz NULL,"
                " request_id text NULL,"
                " partition int NOT NULL,"
                # The whole trail is read partition by partition (views/audit_feed.py).
                " PRIMARY KEY (partition, position))"
            ).format(table),
            t.create_index("audit_log", "user", "(user_id, position)"),
            t.create_index("audit_log", "memory", "(memory_id, position)"),
            # Before the partition column, the feed read this; the primary key serves now.
            SQL("DROP INDEX IF EXISTS {}.{}").format(
                Identifier(t.schema), t.index("audit_log", "partition")
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        copy_rows(cur, t["audit_log"], _COLUMNS, _TYPES, map(_row, batch))


# -- queries -----------------------------------------------------------------------------------

MAX_CHANGES: Final = len(FIELDS)
"""Profile changes one event can cause: one per field at most."""


CHANGE_TYPES: Final = tuple(
    sorted({name for cls, name in EVENT_TYPES.items() if _family(cls) in (_MEMORY, _CANDIDATE)})
)
"""The audit names of a user's memory and candidate changes: what the change feed shows (reads,
searches, denials and settings are not changes of a memory)."""


def changes(src: ReadSource, user_id: str, *, after: int, limit: int) -> list[dict[str, Any]]:
    """The user's memory and candidate changes after a position, ascending: ids, type,
    revision and time, never content (the change feed, `GET /me/changes`)."""
    return src.all(
        SQL(
            "SELECT position, event_type, memory_id, candidate_id, revision, occurred_at"
            " FROM {} WHERE partition = %s AND user_id = %s AND position > %s"
            " AND event_type = ANY(%s) ORDER BY position LIMIT %s"
        ).format(src.t["audit_log"]),
        (src.partition(user_id), user_id, after, list(CHANGE_TYPES), limit),
    )


def forgotten_scope(src: ReadSource, user_id: str, memory_id: UUID) -> Scope | None:
    """The scope a memory of this user had when it was forgotten; None if not forgotten."""
    rows = src.all(
        SQL(
            "SELECT scope_type, workspace_type FROM {} WHERE partition = %s AND memory_id = %s"
            " AND user_id = %s AND event_type = 'memory.deleted' LIMIT 1"
        ).format(src.t["audit_log"]),
        (src.partition(user_id), memory_id, user_id),
    )
    return Scope(rows[0]["scope_type"], rows[0]["workspace_type"]) if rows else None
