"""MemoryLedger: the application service every entry point (API, CLI, scripts) talks to."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.utils import get_topic

from domain.errors import NotFound
from domain.ledger.access import AccessEntry, access_records
from domain.ledger.candidates import CandidateCommands
from domain.ledger.views import Outcome, SettingsView
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings, settings_id
from domain.model.values import Scope, check_key

__all__ = ["MemoryLedger"]


class MemoryLedger(CandidateCommands):
    """Memories, candidates and settings of every user, on one PostgreSQL ledger.

    Every command validates, loads, calls the aggregate and saves in one transaction; races
    with concurrent writers are retried on fresh state, so a stale `expected_revision` always
    ends in RevisionConflict and never in a lost update.
    """

    name = "MemLedger"

    def get_settings(self, user_id: str) -> SettingsView:
        """The user's settings (defaults until first changed)."""
        return SettingsView.of(self._settings(user_id))

    def change_settings(
        self,
        user_id: str,
        *,
        saved_memory_enabled: bool | None = None,
        auto_extract_enabled: bool | None = None,
    ) -> tuple[SettingsView, int | None]:
        """Change one or both switches; returns the settings and the ledger position."""

        def attempt() -> tuple[SettingsView, int | None]:
            settings = self._settings(user_id) or MemorySettings(user_id=user_id)
            changed = settings.change(
                saved_memory_enabled=saved_memory_enabled,
                auto_extract_enabled=auto_extract_enabled,
            )
            position = self._save(settings) if changed or settings.version == 1 else None
            return SettingsView.of(settings), position

        return self._retrying(attempt)

    def forget_by_key(self, user_id: str, scope: Scope, memory_key: str) -> Outcome:
        """Forget the live memory holding this key in this scope (legacy DELETE by key)."""
        memory = self._find_by_key(user_id, scope, check_key(memory_key))
        if memory is None or memory.is_forgotten:
            raise NotFound(f"no memory with key {memory_key!r} in {scope.label()}")
        return self.forget_memory(user_id, memory.id)

    def erase_user(self, user_id: str) -> Outcome:
        """Forget every memory, shred every candidate and reset the settings of one user.

        One transaction: tombstones for all live memories, expiry of pending candidates, and
        the deletion of every data key, claim and fingerprint the user has.
        """

        def attempt() -> Outcome:
            now = self.clock()
            changed: list[Memory | MemoryCandidate | MemorySettings] = []
            for memory_id in self.keys.owned_keys(user_id, "memory"):
                memory = self._memory(user_id, memory_id, live=False)
                if not memory.is_forgotten:
                    memory.forget(now)
                    changed.append(memory)
            for candidate_id in self.keys.owned_keys(user_id, "candidate"):
                candidate = self._candidate(user_id, candidate_id)
                if candidate.status == "pending":
                    candidate.expire()
                    changed.append(candidate)
            settings = self._settings(user_id)
            if settings is not None:
                settings.erase()
                changed.append(settings)
            position = self._save(*changed, shred_users=[user_id])
            return Outcome("erased", position=position)

        outcome = self._retrying(attempt)
        self.keys.forget_all_cached()
        return outcome

    def complete_shredding(self, page: int = 1000) -> int:
        """Destroy every key that outlived its tombstone or rejection; returns how many.

        Forgetting deletes keys in the tombstone's own transaction, so this finds nothing on a
        healthy ledger. It makes shredding hold even after the key table was restored from a
        backup taken before a forget; `serve` and the projection worker run it at start-up.
        """
        forgotten = get_topic(Memory.Forgotten)
        topics = [
            forgotten,
            get_topic(MemoryCandidate.Rejected),
            get_topic(MemoryCandidate.Expired),
        ]
        destroyed, start = 0, 1
        while notes := self.recorder.select_notifications(start, page, topics=topics):
            memories = [UUID(str(n.originator_id)) for n in notes if n.topic == forgotten]
            candidates = [UUID(str(n.originator_id)) for n in notes if n.topic != forgotten]
            held = self.keys.count_held(memories + candidates)
            if held:
                self._save(shred_memories=memories, shred_keys=candidates)
                destroyed += held
            start = notes[-1].id + 1
        if destroyed:
            self.keys.forget_all_cached()
        return destroyed

    def record_access(self, entries: Sequence[AccessEntry]) -> int | None:
        """Append audit records of agent reads, searches and denials in one transaction.

        Each entry becomes its own AccessRecord (one event, no data key, nothing sealed: they
        hold no content); returns the last position, None when there was nothing to record.
        """
        if not entries:
            return None
        return self._retrying(lambda: self._save(*access_records(entries)))

    def _settings(self, user_id: str) -> MemorySettings | None:
        try:
            settings: object = self.repository.get(settings_id(user_id))
        except AggregateNotFoundError:
            return None
        assert isinstance(settings, MemorySettings)
        return settings

    def position(self) -> int:
        """The ledger's latest position (0 when empty)."""
        return self.recorder.max_notification_id() or 0

    def memory_ids(self, user_id: str) -> list[UUID]:
        """Ids of the user's live memories (from the key table, not a projection)."""
        return self.keys.owned_keys(user_id, "memory")
