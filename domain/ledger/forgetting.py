"""Forgetting: append the tombstone and destroy the key, in one transaction (crypto-shredding).

A forgotten memory's sealed fields can never be read again, by any replay: its data key, the
keys of candidates about it, its key claim and their fingerprints go with the tombstone's
transaction. `complete_shredding` finishes the job after a key table was restored from backup.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from eventsourcing.utils import get_topic

from domain.context import retrying
from domain.errors import InvalidInput, NotFound
from domain.ledger.candidates import REJECTION_MEMORY
from domain.ledger.persistence.recorder import LedgerRecorder
from domain.ledger.positions import local_of
from domain.ledger.results import Outcome
from domain.ledger.store import AggregateStore
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from domain.model.values import Scope, check_key

__all__ = ["Forgetting", "shredding_topics"]


def shredding_topics() -> list[str]:
    """The topics of the events whose transaction destroys their aggregate's key."""
    return [
        get_topic(Memory.Forgotten),
        get_topic(MemoryCandidate.Rejected),
        get_topic(MemoryCandidate.Expired),
    ]


class Forgetting:
    """Forget one memory, erase a whole user, and destroy keys that outlived their tombstone."""

    def __init__(
        self,
        store: AggregateStore,
        recorder: LedgerRecorder,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.keys = store.keys
        self.recorder = recorder
        self.clock = clock

    def forget(self, user_id: str, memory_id: UUID) -> Outcome:
        """Irrecoverably forget (section 9.4): append the tombstone, destroy the key, done.

        One transaction appends the tombstone, expires the pending candidates about the memory
        and deletes the memory's data key, the keys of candidates about it, its key claim and
        their fingerprints: a crash leaves all or none. It holds the user's write lock, so no
        candidate about the memory commits meanwhile (nor after: its key could not be stored).
        """

        def attempt() -> Outcome:
            memory = self.store.memory(user_id, memory_id)
            memory.forget(self.clock())
            candidates = self.store.candidates_about(user_id, memory.id)
            for candidate in candidates:
                candidate.expire()
            position = self.store.save(memory, *candidates, shred_memories=[memory.id])
            self.keys.forget_cached([memory.id, *(c.id for c in candidates)])
            return Outcome("forgotten", position=position)

        with self.store.exclusive(user_id):
            outcome = retrying(attempt)
        # Candidate keys tied to this memory were shredded too; drop any cached copy of them.
        self.keys.forget_all_cached()
        return outcome

    def forget_by_key(self, user_id: str, scope: Scope, memory_key: str) -> Outcome:
        """Forget the live memory holding this key in this scope (legacy DELETE by key)."""
        memory = self.store.find_by_key(user_id, scope, check_key(memory_key))
        if memory is None or memory.is_forgotten:
            raise NotFound(f"no memory with key {memory_key!r} in {scope.label()}")
        return self.forget(user_id, memory.id)

    def erase_user(self, user_id: str) -> Outcome:
        """Forget every memory, shred every candidate and reset the settings of one user.

        Holds the user's write lock throughout: what it lists (every memory and candidate the
        ledger's events name as the user's, so also any an earlier erase missed) is all there
        is until it commits. One transaction: tombstones for all live memories, expiry of
        pending candidates, and the deletion of every data key, claim and fingerprint the user
        has. NotFound when the ledger has nothing of the user.
        """
        if not user_id:
            raise InvalidInput("user_id", "required")

        def attempt() -> Outcome:
            now = self.clock()
            memory_ids, candidate_ids = self.store.owned(user_id)
            settings = self.store.settings(user_id)
            if not memory_ids and not candidate_ids and settings is None:
                raise NotFound(f"the ledger has nothing of user {user_id!r}")
            changed: list[Memory | MemoryCandidate | MemorySettings] = []
            for memory_id in memory_ids:
                memory = self.store.memory(user_id, memory_id, live=False)
                if not memory.is_forgotten:
                    memory.forget(now)
                    changed.append(memory)
            for candidate_id in candidate_ids:
                candidate = self.store.candidate(user_id, candidate_id)
                if candidate.status == "pending":
                    candidate.expire()
                    changed.append(candidate)
            if settings is not None:
                settings.erase()
                changed.append(settings)
            position = self.store.save(*changed, shred_users=[user_id])
            return Outcome("erased", position=position)

        with self.store.exclusive(user_id):
            outcome = retrying(attempt)
        self.keys.forget_all_cached()
        return outcome

    def complete_shredding(self, page: int = 1000) -> int:
        """Destroy every key that outlived its tombstone or rejection, and every fingerprint
        past its 30 days; returns how many keys.

        Forgetting deletes keys in the tombstone's own transaction, so this finds nothing on a
        healthy ledger. It makes shredding hold even after the key table was restored from a
        backup taken before a forget; `serve` and the projection worker run it at start-up.
        """
        forgotten = get_topic(Memory.Forgotten)
        topics = shredding_topics()
        destroyed = 0
        for partition in range(self.recorder.partitions):
            after = 0
            while notes := self.recorder.read_partition(partition, after, page, topics=topics):
                memories = [UUID(str(n.originator_id)) for n in notes if n.topic == forgotten]
                candidates = [UUID(str(n.originator_id)) for n in notes if n.topic != forgotten]
                held = self.keys.count_held(partition, memories + candidates)
                if held:
                    self.store.save(
                        shred_memories=memories, shred_keys=candidates, partition=partition
                    )
                    destroyed += held
                after = local_of(notes[-1].id)
        if destroyed:
            self.keys.forget_all_cached()
        # Fingerprints of decided proposals outlive their decision by 30 days only (a
        # partition a transaction: on Citus, each one shard).
        before = self.clock() - REJECTION_MEMORY
        for partition in range(self.recorder.partitions):
            self.store.save(prune_prints_before=before, partition=partition)
        return destroyed
