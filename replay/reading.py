"""Paging through the ledger for replay: filter on each event's clear fields, then decrypt.

`envelopes(ledger, wants, ...)` yields the decoded events that `wants` keeps, in position
order, with their clear fields. `wants` sees each stored event's clear part (owner, ids,
timestamp: never sealed) before anything is decrypted, so events it drops are never unsealed
and their data keys are never fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Notification

from domain.ledger.ledger import MemoryLedger
from domain.ledger.sealing import SealingMapper
from projections.envelope import Envelope, decode_batch

__all__ = ["ReplayError", "Wants", "envelopes", "iso_time", "utc"]

Wants = Callable[[Notification, dict[str, Any]], bool]
"""Keep an event? Judged on the stored notification and its clear fields alone."""


class ReplayError(Exception):
    """The ledger cannot be replayed into the state asked for (an event is unreadable)."""


def envelopes(
    ledger: MemoryLedger,
    wants: Wants,
    *,
    after: int,
    until: int | None,
    batch: int,
    topics: Sequence[str] = (),
) -> Iterator[tuple[Envelope, dict[str, Any]]]:
    """Page through positions `after < position <= until`, decoding only the events kept.

    `topics`, when given, limits the events read to those topics.
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
            state = mapper.clear_state(note)  # without touching any key ({} if unreadable)
            if wants(note, state):
                clear[note.id] = state
        chosen = [note for note in notes if note.id in clear]
        # Redaction is decided by the ledger's tombstones and the live key table, read now
        # for this page, never by a cached key alone.
        dead = ledger.tombstoned(n.originator_id for n in chosen)
        for envelope in decode_batch(mapper, chosen, destroyed=dead):
            yield envelope, clear[envelope.position]
        start = notes[-1].id + 1


def utc(at: datetime) -> datetime:
    """Naive times are taken as UTC (event timestamps are always aware)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def iso_time(value: object) -> str | None:
    """ISO 8601 text of a datetime; None for anything else."""
    return value.isoformat() if isinstance(value, datetime) else None
