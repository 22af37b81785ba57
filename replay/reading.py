"""Paging through the ledger for replay: filter on each event's clear fields, then decrypt.

`envelopes(ledger, wants, ...)` yields the decoded events that `wants` keeps, each partition's
in position order, with their clear fields. `wants` sees each stored event's clear part (owner, ids,
timestamp: never sealed) before anything is decrypted, so events it drops are never unsealed
and their data keys are never fetched.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from eventsourcing.persistence import Notification

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import local_of, partition_of
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
    user_id: str | None = None,
) -> Iterator[tuple[Envelope, dict[str, Any]]]:
    """Page through the ledger, decoding only the events kept.

    Positions order events within a partition only (domain/ledger/positions.py): `after <
    position <= until` narrows the replay to the partition they name (`user_id`: to the
    user's). Partitions are merged by the events' time, each one's events in their order.
    `topics`, when given, limits the events read to those topics.
    """
    if batch < 1:
        raise ValueError("batch must be at least 1")
    named = {partition_of(p) for p in (after, until) if p}
    if user_id is not None:
        named.add(ledger.partition(user_id))
    if len(named) > 1:
        return  # positions of two partitions (or another user's): no event is between them
    partitions = sorted(named) or sorted(ledger.heads())
    streams = [_partition(ledger, wants, p, after, until, batch, topics) for p in partitions]
    if len(streams) == 1:
        yield from streams[0]
    else:
        yield from heapq.merge(*streams, key=_when)


def _partition(
    ledger: MemoryLedger,
    wants: Wants,
    partition: int,
    after: int,
    until: int | None,
    batch: int,
    topics: Sequence[str],
) -> Iterator[tuple[Envelope, dict[str, Any]]]:
    """The kept events of one partition, `after < position <= until`, in order."""
    mapper: SealingMapper = ledger.mapper  # type: ignore[assignment]
    recorder = ledger.store.recorder()
    start = local_of(after) if after and partition_of(after) == partition else 0
    stop = local_of(until) if until is not None else None
    while stop is None or start < stop:
        notes = recorder.read_partition(partition, start, batch, until=stop, topics=topics)
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
        start = local_of(notes[-1].id)


def _when(pair: tuple[Envelope, dict[str, Any]]) -> tuple[float, int]:
    at = pair[1].get("timestamp")
    return (at.timestamp() if isinstance(at, datetime) else float("-inf"), pair[0].position)


def utc(at: datetime) -> datetime:
    """Naive times are taken as UTC (event timestamps are always aware)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def iso_time(value: object) -> str | None:
    """ISO 8601 text of a datetime; None for anything else."""
    return value.isoformat() if isinstance(value, datetime) else None
