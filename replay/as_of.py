"""A user's memories exactly as they stood at a past time (`as_of`), rebuilt from the ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, cast
from uuid import UUID

from eventsourcing.persistence import Notification
from eventsourcing.utils import get_topic

from domain.ledger.ledger import MemoryLedger
from domain.model.memory import Memory
from projections.views.audit_log import EVENT_TYPES
from replay.reading import ReplayError, envelopes, iso_time, utc

__all__ = ["as_of"]

_MEMORY_TOPICS: Final = [get_topic(c) for c in EVENT_TYPES if issubclass(c, Memory.Event)]


def as_of(
    ledger: MemoryLedger,
    user_id: str,
    at: datetime,
    *,
    memory_id: UUID | None = None,
    batch: int = 1000,
) -> list[dict[str, Any]]:
    """The user's memories exactly as they stood at `at`, in the API's `Memory` shape.

    Each memory's events are applied, in order, by the Memory aggregate's own event classes
    (so this cannot drift from the domain) up to its first event with `timestamp > at`; a
    later event never counts, even from a writer whose clock ran behind. Memories forgotten
    at or before `at` are left out. A memory that was live then but is forgotten now
    has `memory_key` and `content` null and `redacted: true`. With `memory_id`, only that
    memory is returned (if it was live at `at`). Naive times are UTC. Raises ReplayError
    when one of the user's memory events is unreadable or out of order.
    """
    upto = utc(at)
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
    found = envelopes(
        ledger, wants, after=0, until=None, batch=batch, topics=_MEMORY_TOPICS, user_id=user_id
    )
    for envelope, _ in found:
        event, originator = envelope.event, envelope.originator_id
        previous = memories.get(originator)
        if not isinstance(event, Memory.Event) or (
            (previous is None) != isinstance(event, Memory.Created)
        ):
            msg = f"ledger event at position {envelope.position} ({envelope.topic}) is unreadable"
            raise ReplayError(f"{msg} or out of order; memory {originator} cannot be rebuilt")
        memories[originator] = cast(Memory, event.mutate(previous))
    return [
        _memory(ledger, m)
        for m in memories.values()
        if not m.is_forgotten and (memory_id is None or m.id == memory_id)
    ]


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
        "created_at": iso_time(memory.created_on),
        "updated_at": iso_time(memory.updated_at),
        "last_confirmed_at": iso_time(memory.last_confirmed_at),
        "review_after": iso_time(memory.review_after),
        "expires_at": iso_time(memory.expires_at),
        "redacted": redacted,
    }
