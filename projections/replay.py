"""Auditor replay: the ledger as JSON-ready events, and a user's memories as of a past time.

Reads the ledger itself, never a projection, so it is exact at every position. The user,
memory and time filters are applied to the clear part of each stored event (owner, ids and
timestamp are never sealed) before anything is decrypted: events that are filtered out are
never unsealed and their data keys are never fetched.

Personal fields are decrypted while their data key exists. Once it is destroyed (the memory was
forgotten, the candidate rejected or expired) the event says `redacted: true` and its personal
fields are left out: the content is irrecoverable by design.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, cast
from uuid import UUID

from eventsourcing.persistence import Notification
from eventsourcing.utils import get_topic

from domain.ledger.ledger import MemoryLedger
from domain.ledger.sealing import SealingMapper
from domain.model.access import AccessRecord
from domain.model.candidate import MemoryCandidate
from domain.model.events import personal_fields
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from projections.envelope import Envelope, decode_batch
from projections.views.audit_log import EVENT_TYPES, event_type

__all__ = ["ReplayError", "as_of", "replay_events"]

"""Prefix of a sealed state: magic, 4-byte length of the clear JSON, clear JSON, sealed part."""

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

_MEMORY_TOPICS: Final = [get_topic(c) for c in EVENT_TYPES if issubclass(c, Memory.Event)]


class ReplayError(Exception):
    """The ledger cannot be replayed into the state asked for (an event is unreadable)."""


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
        None if since is None else _utc(since),
        None if before is None else _utc(before),
    )
    found = _envelopes(ledger, wanted.wants, after=after, until=until, batch=batch)
    for envelope, clear in found:
        yield _record(ledger, envelope, clear)


def as_of(
    ledger: MemoryLedger, user_id: str, at: datetime, *, batch: int = 1000
) -> list[dict[str, Any]]:
    """The user's memories exactly as they stood at `at`, in the API's `Memory` shape.

    Each memory's events are applied, in order, by the Memory aggregate's own event classes
    (so this cannot drift from the domain) up to its first event with `timestamp > at`; a
    later event never counts, even from a writer whose clock ran behind. Memories forgotten
    at or before `at` are left out. A memory that was live then but is forgotten now
    has `memory_key` and `content` null and `redacted: true`.
    """
    upto = _utc(at)
    past: set[UUID | str] = set()  # memories already past `at`: later events never count

    def wants(note: Notification, clear: dict[str, Any]) -> bool:
        if clear.get("user_id") != user_id or note.originator_id in past:
            return False
        when = clear.get("timestamp")
        if isinstance(when, datetime) and when <= upto:
            return True
        past.add(note.originator_id)  # each memory is replayed up to its first later event
        return False

    memories: dict[UUID, Memory] = {}
    found = _envelopes(ledger, wants, after=0, until=None, batch=batch, topics=_MEMORY_TOPICS)
    for envelope, _ in found:
        event, memory_id = envelope.event, envelope.originator_id
        previous = memories.get(memory_id)
        if not isinstance(event, Memory.Event) or (
            (previous is None) != isinstance(event, Memory.Created)
        ):
            msg = f"ledger event at position {envelope.position} ({envelope.topic}) is unreadable"
            raise ReplayError(f"{msg} or out of order; memory {memory_id} cannot be rebuilt")
        memories[memory_id] = cast(Memory, event.mutate(previous))
    return [_memory(ledger, m) for m in memories.values() if not m.is_forgotten]


# -- reading ---------------------------------------------------------------------------------


def _envelopes(
    ledger: MemoryLedger,
    wants: Callable[[Notification, dict[str, Any]], bool],
    *,
    after: int,
    until: int | None,
    batch: int,
    topics: Sequence[str] = (),
) -> Iterator[tuple[Envelope, dict[str, Any]]]:
    """Page through the ledger, decoding (and decrypting) only the events `wants` keeps.

    `wants` sees each event's clear fields, in position order, before anything is decrypted.
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    mapper: SealingMapper = ledger.mapper  # type: ignore[assignment]
    start = max(after, 0) + 1
    while until is None or start <= until:
        notes = ledger.recorder.select_notifications(start, batch, stop=until, topics=topics)
        if not notes:
            return
        clear: dict[int, dict[str, Any]] = {}
        for note in notes:
            state = _clear_state(mapper, note)
            if wants(note, state):
                clear[note.id] = state
        chosen = [note for note in notes if note.id in clear]
        for envelope in decode_batch(mapper, chosen):
            yield envelope, clear[envelope.position]
        start = notes[-1].id + 1


def _clear_state(mapper: SealingMapper, note: Notification) -> dict[str, Any]:
    """The clear attributes of a stored event, without touching any key ({} if unreadable)."""
    return mapper.clear_state(note)


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
    # Decoding just fetched the key: if it is gone now, the sealed fields are never shown.
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
        "occurred_at": _time(attributes.get("timestamp")),
        "request_id": _text(attributes.get("request_id")),
        "redacted": redacted,
        "data": data,
    }


def _memory(ledger: MemoryLedger, memory: Memory) -> dict[str, Any]:
    redacted = ledger.keys.get(memory.id) is None
    return {
        "memory_id": str(memory.id),
        "memory_key": None if redacted else memory.memory_key,
        "content": None if redacted else memory.content,
        "category": memory.category,
        "scope_type": memory.scope.scope_type,
        "workspace_type": memory.scope.workspace_type,
        "source_type": memory.source_type,
        "status": memory.status,
        "revision": memory.revision,
        "created_at": _time(memory.created_on),
        "updated_at": _time(memory.updated_at),
        "last_confirmed_at": _time(memory.last_confirmed_at),
        "review_after": _time(memory.review_after),
        "expires_at": _time(memory.expires_at),
        "redacted": redacted,
    }


def _utc(at: datetime) -> datetime:
    """Naive times are taken as UTC (event timestamps are always aware)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _time(value: object) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


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
