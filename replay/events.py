"""The ledger as JSON-ready events, one dict per event in position order (`replay_events`).

Reads the ledger itself, never a projection, so it is exact at every position. The user,
memory and time filters are applied to the clear part of each stored event before anything is
decrypted (see `replay.reading`). Personal fields are decrypted while their data key exists;
once it is destroyed (the memory was forgotten, the candidate rejected or expired) the event
says `redacted: true` and its personal fields are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from eventsourcing.persistence import Notification

from domain.ledger.ledger import MemoryLedger
from domain.model.access import AccessRecord
from domain.model.candidate import MemoryCandidate
from domain.model.events import personal_fields
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from projections.envelope import Envelope
from projections.views.audit_log import event_type
from replay.reading import envelopes, iso_time, utc

__all__ = ["replay_events"]

_META: Final = frozenset(
    {
        "originator_id",
        "originator_version",
        "originator_topic",
        "timestamp",
        "request_id",
        "user_id",
        "scope_type",
        "workspace_type",
        "revision",
    }
)
"""Event attributes shown beside `data` (or library bookkeeping), never inside it."""


@dataclass(frozen=True, slots=True)
class _Filter:
    """What to keep, judged on an event's clear fields alone (nothing decrypted)."""

    user_id: str | None = None
    memory_id: UUID | None = None
    since: datetime | None = None
    before: datetime | None = None

    def wants(self, note: Notification, clear: dict[str, Any]) -> bool:
        if self.user_id is not None and clear.get("user_id") != self.user_id:
            return False
        if self.memory_id is not None and self.memory_id not in (
            note.originator_id,
            clear.get("target_memory_id"),
            clear.get("resulting_memory_id"),
            clear.get("memory_id"),  # an access record: a read or search that returned it
        ):
            return False
        if self.since is None and self.before is None:
            return True
        at = clear.get("timestamp")
        if not isinstance(at, datetime):
            return False  # an event without a readable time is in no time range
        return (self.since is None or at >= self.since) and (
            self.before is None or at < self.before
        )


def replay_events(
    ledger: MemoryLedger,
    *,
    user_id: str | None = None,
    memory_id: UUID | None = None,
    after: int = 0,
    until: int | None = None,
    since: datetime | None = None,
    before: datetime | None = None,
    batch: int = 1000,
) -> Iterator[dict[str, Any]]:
    """One JSON-ready dict per ledger event, in position order.

    Positions `after < position <= until`; times `since <= occurred_at < before` (naive times
    are UTC). `memory_id` keeps the memory's own events and the candidate events that target
    it or resulted in it, and the access records (reads, searches) that returned it. Access
    records replay as `aggregate: "access"`. An event of a type this version cannot read is
    kept with `aggregate: "unknown"` and empty `data`.
    """
    wanted = _Filter(
        user_id,
        memory_id,
        None if since is None else utc(since),
        None if before is None else utc(before),
    )
    found = envelopes(ledger, wanted.wants, after=after, until=until, batch=batch, user_id=user_id)
    for envelope, clear in found:
        yield _record(ledger, envelope, clear)


# -- shaping ---------------------------------------------------------------------------------


def _aggregate(event: object) -> str:
    if isinstance(event, Memory.Event):
        return "memory"
    if isinstance(event, MemoryCandidate.Event):
        return "candidate"
    if isinstance(event, MemorySettings.Event):
        return "settings"
    if isinstance(event, AccessRecord.Event):
        return "access"
    return "unknown"


def _record(ledger: MemoryLedger, envelope: Envelope, clear: dict[str, Any]) -> dict[str, Any]:
    event = envelope.event
    aggregate = _aggregate(event)
    known = aggregate != "unknown"
    attributes: dict[str, Any] = dict(vars(event)) if known else clear
    sealed = personal_fields(type(event)) if known else ()
    # Decoding just read the key afresh (and counted a tombstoned aggregate's as gone): if it
    # is gone now, the sealed fields are never shown.
    redacted = bool(sealed) and ledger.keys.get(envelope.originator_id) is None
    scope_type = attributes.get("scope_type", attributes.get("proposed_scope_type"))
    workspace_type = attributes.get("workspace_type", attributes.get("proposed_workspace_type"))
    data = (
        {
            name: _jsonable(value)
            for name, value in attributes.items()
            if name not in _META and not (redacted and name in sealed)
        }
        if known
        else {}
    )
    return {
        "position": envelope.position,
        "event_id": str(envelope.event_id),
        "event_type": event_type(envelope),
        "topic": envelope.topic,
        "aggregate": aggregate,
        "aggregate_id": str(envelope.originator_id),
        "version": envelope.version,
        "user_id": _text(attributes.get("user_id")),
        "scope_type": _text(scope_type),
        "workspace_type": _text(workspace_type),
        "revision": attributes.get("revision") if known else None,
        "occurred_at": iso_time(attributes.get("timestamp")),
        "request_id": _text(attributes.get("request_id")),
        "redacted": redacted,
        "data": data,
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)  # UUID, Decimal and anything else with a faithful text form
