"""Loading a user's aggregates, and saving aggregates with their side-table rows atomically."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, PersistenceError
from eventsourcing.utils import get_topic

from domain.context import ClaimTaken, Retry, outage_unavailable
from domain.errors import LedgerUnavailable, MemoryForgotten, NotFound
from domain.ledger.hashes import KeyedHashes
from domain.ledger.keystore import DataKeyStore
from domain.ledger.persistence import recorder, routing
from domain.ledger.persistence.lookups import Lookups
from domain.ledger.persistence.recorder import LedgerRecorder
from domain.ledger.persistence.tables import NewDataKey
from domain.ledger.positions import Legacy, pack
from domain.ledger.sealing import MissingDataKey
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings, settings_id
from domain.model.values import Scope

__all__ = ["AggregateStore"]

T = TypeVar("T")

_LOCKED: Final = (Memory, MemoryCandidate, MemorySettings)
"""Aggregates whose saves take their user's write lock (what erasing a user changes)."""


class AggregateStore:
    """What every command loads and saves through.

    Loading checks ownership: another user's aggregate is NotFound, like a missing one. A save
    writes the aggregates' new events and the side-table rows (`new_keys`, `claims`,
    `fingerprints`, `link_keys`, `shred_memories`, `shred_keys`, `shred_users`: see
    `LedgerRecorder`) in one transaction; a lost race raises Retry (ClaimTaken for a key claim)
    and any other persistence failure LedgerUnavailable. A save of memories, candidates or
    settings takes their user's write lock (shared); `exclusive(user_id)` holds it alone.
    """

    def __init__(
        self,
        application: Application[UUID],
        keys: DataKeyStore,
        hashes: KeyedHashes,
        lookups: Lookups,
    ) -> None:
        self._application = application
        self.keys = keys
        self.hashes = hashes
        self.lookups = lookups

    # -- loading -----------------------------------------------------------------------------

    def get(self, aggregate_id: UUID) -> object:
        """Any aggregate by id, whoever owns it (AggregateNotFoundError when there is none)."""
        with outage_unavailable():
            return self._application.repository.get(aggregate_id)

    def load(self, cls: type[T], user_id: str, aggregate_id: UUID) -> T:
        """The user's aggregate of this class (NotFound otherwise), read in the user's
        partition only (one shard on Citus: persistence/routing.py)."""
        try:
            with routing.within(self.partition(user_id)):
                aggregate = self.get(aggregate_id)
        except AggregateNotFoundError:
            raise NotFound(f"{cls.__name__} {aggregate_id} not found") from None
        if not isinstance(aggregate, cls) or getattr(aggregate, "user_id", None) != user_id:
            raise NotFound(f"{cls.__name__} {aggregate_id} not found")
        return aggregate

    def memory(self, user_id: str, memory_id: UUID, *, live: bool = True) -> Memory:
        """The user's memory; a forgotten one raises MemoryForgotten unless `live` is False."""
        memory = self.load(Memory, user_id, memory_id)
        if live and memory.is_forgotten:
            raise MemoryForgotten(memory_id)
        return memory

    def candidate(self, user_id: str, candidate_id: UUID) -> MemoryCandidate:
        """The user's candidate, in any state."""
        return self.load(MemoryCandidate, user_id, candidate_id)

    def settings(self, user_id: str) -> MemorySettings | None:
        """The user's settings aggregate (None until first changed)."""
        try:
            with routing.within(self.partition(user_id)):
                settings = self.get(settings_id(user_id))
        except AggregateNotFoundError:
            return None
        assert isinstance(settings, MemorySettings)
        return settings

    def find_by_key(self, user_id: str, scope: Scope, memory_key: str) -> Memory | None:
        """The memory holding this key claim (forgotten ones included: the claim is released
        in the tombstone's own transaction, so a forgotten holder is a race being lost)."""
        with outage_unavailable():
            holder = self.lookups.claim_holder(
                self.partition(user_id), self.hashes.claim(user_id, scope, memory_key).value
            )
        if holder is None:
            return None
        return self.memory(user_id, holder, live=False)

    def owned(self, user_id: str) -> tuple[list[UUID], list[UUID]]:
        """Ids of every memory and candidate the user ever had, forgotten ones included, read
        from the ledger's events (not from keys, which a forget destroys)."""
        recorder = self.recorder()
        created, proposed = get_topic(Memory.Created), get_topic(MemoryCandidate.Proposed)
        found = recorder.originators(self.partition(user_id), user_id, [created, proposed])
        return (
            [aggregate_id for aggregate_id, topic in found if topic == created],
            [aggregate_id for aggregate_id, topic in found if topic == proposed],
        )

    def candidates_about(self, user_id: str, memory_id: UUID) -> list[MemoryCandidate]:
        """The user's pending candidates about this memory (those holding a key naming it)."""
        about = self.keys.candidates_about(self.partition(user_id), memory_id)
        found = [self.candidate(user_id, c) for c in about]
        return [candidate for candidate in found if candidate.status == "pending"]

    # -- saving ------------------------------------------------------------------------------

    def save(
        self,
        *aggregates: Any,
        new_keys: Sequence[NewDataKey] = (),
        partition: int | None = None,
        **changes: Any,
    ) -> int | None:
        """Save aggregates and side-table rows atomically; returns the last position.

        Every side-table row goes to its user's partition: found from the user id it names, or
        from the aggregate of this save it names; `partition` is the one of the keys it shreds
        by id without saving their aggregate, and of the decided fingerprints it prunes when it
        names no user (else those are pruned in the partitions of its users)."""
        users = {a.user_id for a in aggregates if isinstance(a, _LOCKED)}
        locks = [self.hashes.lock(user) for user in users]
        placement = self._placement(aggregates, new_keys, partition, changes)
        try:
            position = recorder.record(
                self._application,
                aggregates,
                {"user_locks": locks, "new_keys": new_keys, **placement, **changes},
            )
        except IntegrityError as error:
            self.keys.discard(new_keys)
            if recorder.lost_claim(error):
                raise ClaimTaken("key claimed concurrently") from error
            if recorder.stale_key(error):
                # Hashed under a key destroyed meanwhile (another process's cache held it):
                # the attempt runs again with the keys it named read afresh.
                self.keys.evict(_hashed_under(changes))
                raise Retry("hashed under a key destroyed meanwhile") from error
            raise Retry("aggregate changed concurrently") from error
        except PersistenceError as error:
            self.keys.discard(new_keys)
            raise LedgerUnavailable(str(error)) from error
        except MissingDataKey as error:  # shredded by a concurrent forget while sealing
            self.keys.discard(new_keys)
            raise Retry(str(error)) from error
        except BaseException:
            self.keys.discard(new_keys)
            raise
        self.keys.unstage(new_keys)
        return position

    def _placement(
        self,
        aggregates: Sequence[Any],
        new_keys: Sequence[NewDataKey],
        partition: int | None,
        changes: dict[str, Any],
    ) -> dict[str, Any]:
        """The partitions of a save's events and side-table rows (LedgerRecorder._transaction,
        SideTables.add)."""
        partitions: dict[Any, int] = {a.id: self.partition(a.user_id) for a in aggregates}
        named = [*new_keys, *changes.get("claims", ()), *changes.get("fingerprints", ())]
        users = {row.user_id for row in named} | set(changes.get("shred_users", ()))
        user_partitions = {user: self.partition(user) for user in users}
        by_id = [
            *changes.get("shred_memories", ()),
            *changes.get("shred_keys", ()),
            *(key_id for key_id, _ in changes.get("link_keys", ())),
        ]
        if partition is not None:
            for aggregate_id in by_id:
                partitions.setdefault(aggregate_id, partition)
        pruned = set(user_partitions.values())
        if not pruned and partition is not None:
            pruned = {partition}
        return {
            "partitions": partitions,
            "user_partitions": user_partitions,
            "prune_partitions": sorted(pruned),
        }

    @contextmanager
    def exclusive(self, user_id: str) -> Iterator[None]:
        """No other save of the user's memories, candidates or settings commits until the exit
        (they wait, `lock_timeout` at most); this thread's saves meanwhile go through."""
        recorder = self.recorder()
        try:
            with recorder.exclusive(self.hashes.lock(user_id)):
                yield
        except PersistenceError as error:
            raise LedgerUnavailable(str(error)) from error

    def partition(self, user_id: str) -> int:
        """The partition holding the user's aggregates (persistence/partitions.py)."""
        return self.hashes.partition(user_id, self.recorder().partitions)

    def position(self, user_id: str) -> int:
        """The latest position of the user's partition (`pack(partition, 0)` when empty)."""
        partition = self.partition(user_id)
        with outage_unavailable():
            return pack(partition, self.recorder().heads()[partition])

    def heads(self) -> dict[int, int]:
        """Every partition's latest position within it."""
        with outage_unavailable():
            return self.recorder().heads()

    def legacy_position(self, user_id: str, legacy: Legacy) -> int:
        """The position in the user's partition that a position given out before the ledger
        was partitioned (a global notification id) stands for: the user's last event at or
        before it (the upgrade kept the events' notification ids)."""
        partition = self.partition(user_id)
        with outage_unavailable():
            local = self.recorder().legacy_position(partition, legacy.notification_id)
        return pack(partition, local)

    def recorded(self) -> int:
        """How many events the ledger holds (its partitions' heads added up)."""
        with outage_unavailable():
            return sum(self.recorder().heads().values())

    def recorder(self) -> LedgerRecorder:
        recorder = self._application.recorder
        assert isinstance(recorder, LedgerRecorder), "the ledger runs on its own recorder"
        return recorder


def _hashed_under(changes: dict[str, Any]) -> set[UUID]:
    """The ids of the keys a save's claims and fingerprints were hashed under."""
    rows = [*changes.get("claims", ()), *changes.get("fingerprints", ())]
    return {row.key_id for row in rows if row.key_id is not None}
