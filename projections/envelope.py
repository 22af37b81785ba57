"""Ledger notifications decoded once per batch, for every projection to read."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha1
from typing import Any, Final, Generic, TypeVar
from uuid import NAMESPACE_URL, UUID, SafeUUID, uuid5

from eventsourcing.persistence import Notification

from domain.ledger.keystore import user_key_id
from domain.ledger.positions import local_of, partition_of
from domain.ledger.sealing import SealingMapper
from projections.failures import failure

__all__ = ["Envelope", "EventKinds", "decode_batch", "event_id"]

_log = logging.getLogger(__name__)
_K = TypeVar("_K")
_EVENT_IDS = uuid5(NAMESPACE_URL, "memledger:event-id")
_PREFIX: Final = _EVENT_IDS.bytes
_CLEAR: Final = ~((0xC000 << 48) | (0xF000 << 64))  # variant and version bits
_SET: Final = (0x8000 << 48) | (5 << 76)  # RFC 4122 variant, version 5


def event_id(originator_id: UUID, version: int) -> UUID:
    """A stable id for a ledger event (the ledger itself identifies it by aggregate + version).

    Equal to `uuid5(_EVENT_IDS, f"{originator_id}/{version}")`, made without `UUID.__init__`
    (an audit row per event makes one).
    """
    digest = sha1(_PREFIX + f"{originator_id}/{version}".encode()).digest()
    made = object.__new__(UUID)
    object.__setattr__(made, "int", int.from_bytes(digest[:16]) & _CLEAR | _SET)
    object.__setattr__(made, "is_safe", SafeUUID.unknown)
    return made


class EventKinds(Generic[_K]):
    """What a projection does with each event class: the first base it matches, cached.

    A batch meets a handful of classes, so one dict lookup per event replaces a chain of
    isinstance checks; an unknown class (or `type(None)`, an unreadable event) gets `default`.
    Any value is cached, None included.
    """

    def __init__(self, table: Sequence[tuple[type, _K]], default: _K) -> None:
        self._table = tuple(table)
        self._default = default
        self._cache: dict[type, _K] = {}

    def __call__(self, cls: type) -> _K:
        try:
            return self._cache[cls]
        except KeyError:
            kind = next((k for base, k in self._table if issubclass(cls, base)), self._default)
            self._cache[cls] = kind
            return kind


@dataclass(frozen=True, slots=True)
class Envelope:
    """One ledger event at its position (domain/ledger/positions.py: partition and position
    within it, in one integer); `event` is None when its type is unknown here."""

    position: int
    originator_id: UUID
    version: int
    topic: str
    event: Any

    @property
    def partition(self) -> int:
        """The ledger partition the event is in."""
        return partition_of(self.position)

    @property
    def local(self) -> int:
        """The event's position within its partition."""
        return local_of(self.position)

    @property
    def timestamp(self) -> datetime | None:
        """When the event happened (None for an event this code cannot read)."""
        return getattr(self.event, "timestamp", None)

    @property
    def request_id(self) -> str | None:
        """The request id of the command that recorded the event, if it was given one."""
        return getattr(self.event, "request_id", None)

    @property
    def event_id(self) -> UUID:
        """See event_id()."""
        return event_id(self.originator_id, self.version)


def decode_batch(
    mapper: SealingMapper,
    notifications: Sequence[Notification],
    *,
    fresh: bool = True,
    destroyed: Iterable[UUID] = (),
) -> list[Envelope]:
    """Decode notifications, fetching the data keys of the whole batch in one query.

    `fresh` (the live worker, replays): the batch's data keys and its users' own keys are read
    from the key table whatever this process has cached, so nothing is decoded, sealed or
    hashed with a key another process destroyed before these events were read, even before
    its revocation note arrives. A rebuild, whose reader loads its users' keys itself, passes
    False (cached keys are used). `destroyed`: keys that count as gone whatever the table
    says (their tombstone is in the ledger).

    An event whose topic this version of the code does not know (written by a newer release)
    or that cannot be decoded is passed on with `event=None`: projections skip it, audit
    records it, and nothing stops. An outage while decoding (a data key that could not be
    fetched: `projections.failures` calls it transient) is raised instead: the batch is read
    again later, no event of it skipped for good.
    """
    sealed = [n.originator_id for n in notifications if bytes(n.state[:4]) == b"MLS1"]
    # fresh: each event's clear part is decoded once, for its user (whose key is refreshed)
    # and then for the event itself
    clears = [mapper.clear_state(n) if fresh else None for n in notifications]
    if fresh:
        users = {clear.get("user_id") for clear in clears if clear is not None}
        owners = [user_key_id(user) for user in users if isinstance(user, str)]
        mapper.keys.refresh([*sealed, *owners], destroyed)
    else:
        mapper.keys.prefetch(sealed)
    envelopes = []
    for note, clear in zip(notifications, clears, strict=True):
        try:
            event = mapper.to_domain_event(note, clear)
        except Exception as error:
            if failure(error) == "transient":
                raise
            _log.warning(
                "ledger event %s at position %s is unreadable here: %s",
                note.topic,
                note.id,
                type(error).__name__,
            )
            event = None
        envelopes.append(
            Envelope(note.id, note.originator_id, note.originator_version, note.topic, event)
        )
    return envelopes
