"""Commands on memories: create, update, replace, suppress, restore, reschedule, forget."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final
from uuid import UUID, uuid4

from domain.errors import InvalidInput
from domain.ledger.application import UNSET, LedgerBase, _ClaimTaken
from domain.ledger.keystore import NewDataKey
from domain.ledger.persistence.recorder import Claim
from domain.ledger.views import MemoryView, Outcome
from domain.model.memory import Memory
from domain.model.values import (
    SOURCE_TYPES,
    Scope,
    check_category,
    check_changed_via,
    check_content,
    check_key,
    check_time,
)
from domain.model.workspace_rules import check_workspace_content

__all__ = ["MemoryCommands"]

_MAX_ORIGIN_ITEMS: Final = 16
_MAX_ORIGIN_CHARS: Final = 200


def _check_origin(origin: Mapping[str, str] | None) -> dict[str, str] | None:
    """A small dict of short strings (stored in clear: never content, keys or names)."""
    if origin is None:
        return None
    if len(origin) > _MAX_ORIGIN_ITEMS:
        raise InvalidInput("origin", f"must have at most {_MAX_ORIGIN_ITEMS} items")
    for name, value in origin.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidInput("origin", "names and values must be strings")
        if not name or len(name) > 64 or len(value) > _MAX_ORIGIN_CHARS:
            raise InvalidInput("origin", "names and values must be short")
    return dict(origin)


class MemoryCommands(LedgerBase):
    """What a user (or an agent on their explicit request) can do to their memories."""

    def create_memory(
        self,
        user_id: str,
        *,
        scope: Scope,
        memory_key: str,
        content: str,
        category: str,
        source_type: str = "explicit",
        changed_via: str = "user_api",
        review_after: datetime | None = None,
        expires_at: datetime | None = None,
        origin: Mapping[str, str] | None = None,
    ) -> Outcome:
        """Create a memory; the same content under the same key is an idempotent success.

        A different content under a live key raises KeyExists: nothing is overwritten.
        `origin` (migrations only) keeps where the memory came from and its original
        timestamps as data, e.g. {"system": "legacy-coremem", "created_at": "..."}.
        """
        key, text, category = (
            check_key(memory_key),
            check_content(content),
            check_category(category),
        )
        check_workspace_content(scope, text)
        check_changed_via(changed_via)
        if source_type not in SOURCE_TYPES:
            raise InvalidInput("source_type", "must be 'explicit' or 'confirmed'")
        now = self.clock()
        check_time("review_after", review_after, now=now, future=False)
        check_time("expires_at", expires_at, now=now, future=True)
        origin_data = _check_origin(origin)

        def attempt() -> Outcome:
            # Create first: the claim's primary key refuses a taken (user, scope, key) inside
            # the save, so only a conflict pays for looking up the memory that holds it.
            memory, new_key, claim = self._build(
                user_id,
                scope,
                key,
                text,
                category,
                source_type,
                changed_via,
                None,
                review_after,
                expires_at,
                origin_data,
            )
            try:
                position = self._save(memory, new_keys=[new_key], claims=[claim])
            except _ClaimTaken:
                existing = self._find_by_key(user_id, scope, key)
                if existing is None:  # released since (forgotten): run the body again
                    raise
                return self._existing_outcome(existing, text)
            return Outcome("created", MemoryView.of(memory), position=position)

        return self._retrying(attempt)

    def put_global_memory(
        self,
        user_id: str,
        *,
        memory_key: str,
        content: str,
        category: str,
        changed_via: str = "user_api",
    ) -> Outcome:
        """Legacy PUT: create the global memory with this key, or replace its value."""
        key, text, category = (
            check_key(memory_key),
            check_content(content),
            check_category(category),
        )
        scope = Scope.global_()

        def attempt() -> Outcome:
            existing = self._find_by_key(user_id, scope, key)
            if existing is None:
                return self.create_memory(
                    user_id,
                    scope=scope,
                    memory_key=key,
                    content=text,
                    category=category,
                    changed_via=changed_via,
                )
            return self._change(existing, None, text, category, changed_via, replace=True)

        return self._retrying(attempt)

    def update_memory(
        self,
        user_id: str,
        memory_id: UUID,
        *,
        expected_revision: int,
        content: str | None = None,
        category: str | None = None,
        review_after: Any = UNSET,
        expires_at: Any = UNSET,
        changed_via: str = "user_api",
    ) -> Outcome:
        """Correct content/category (revision + 1) and/or reschedule; stale revision: conflict."""
        if not isinstance(expected_revision, int) or expected_revision < 1:
            raise InvalidInput("expected_revision", "must be a positive integer")
        text = None if content is None else check_content(content)
        category = None if category is None else check_category(category)
        check_changed_via(changed_via)
        now = self.clock()
        if review_after is not UNSET:
            check_time("review_after", review_after, now=now, future=False)
        if expires_at is not UNSET:
            check_time("expires_at", expires_at, now=now, future=True)

        def attempt() -> Outcome:
            memory = self._memory(user_id, memory_id)
            memory.check_revision(expected_revision)
            if text is not None:
                check_workspace_content(memory.scope, text)
            changed = False
            if text is not None or category is not None:
                changed = memory.change_content(
                    expected_revision=expected_revision,
                    content=text if text is not None else memory.content,
                    content_hash=self.content_hash(memory.id, text or memory.content),
                    category=category or memory.category,
                    changed_via=changed_via,
                )
            if review_after is not UNSET or expires_at is not UNSET:
                changed |= memory.reschedule(
                    review_after=memory.review_after if review_after is UNSET else review_after,
                    expires_at=memory.expires_at if expires_at is UNSET else expires_at,
                )
            if not changed:
                return Outcome("unchanged", MemoryView.of(memory))
            position = self._save(memory)
            return Outcome("updated", MemoryView.of(memory), position=position)

        return self._retrying(attempt)

    def restore_version(
        self, user_id: str, memory_id: UUID, *, revision: int, expected_revision: int
    ) -> Outcome:
        """Make an earlier version's content the newest revision."""

        def attempt() -> Outcome:
            memory = self._memory(user_id, memory_id)
            memory.check_revision(expected_revision)
            old = memory.find_version(revision)
            memory.restore_version(
                revision=revision,
                expected_revision=expected_revision,
                content_hash=self.content_hash(memory.id, old.content),
                changed_via="user_api",
            )
            position = self._save(memory)
            return Outcome("updated", MemoryView.of(memory), position=position)

        return self._retrying(attempt)

    def suppress_memory(self, user_id: str, memory_id: UUID) -> Outcome:
        """Exclude from retrieval until restored (revision unchanged)."""
        return self._status_change(user_id, memory_id, Memory.suppress, "suppressed")

    def restore_memory(self, user_id: str, memory_id: UUID) -> Outcome:
        """Bring a suppressed memory back into retrieval (revision unchanged)."""
        return self._status_change(user_id, memory_id, Memory.restore, "restored")

    def confirm_memory(self, user_id: str, memory_id: UUID) -> Outcome:
        """Record that the user confirmed the memory is still right."""
        return self._status_change(user_id, memory_id, Memory.confirm, "confirmed")

    def forget_memory(self, user_id: str, memory_id: UUID) -> Outcome:
        """Irrecoverably forget (section 9.4): append the tombstone, destroy the key, done.

        One transaction appends the tombstone and deletes the memory's data key, the keys of
        candidates about it, its key claim and their fingerprints: a crash leaves all or none.
        """

        def attempt() -> Outcome:
            memory = self._memory(user_id, memory_id)
            memory.forget(self.clock())
            position = self._save(memory, shred_memories=[memory.id])
            self.keys.forget_cached([memory.id])
            return Outcome("forgotten", position=position)

        outcome = self._retrying(attempt)
        # Candidate keys tied to this memory were shredded too; drop any cached copy of them.
        self.keys.forget_all_cached()
        return outcome

    # -- helpers -----------------------------------------------------------------------------

    def _build(
        self,
        user_id: str,
        scope: Scope,
        key: str,
        text: str,
        category: str,
        source_type: str,
        changed_via: str,
        source_candidate_id: UUID | None,
        review_after: datetime | None,
        expires_at: datetime | None,
        origin: dict[str, str] | None = None,
    ) -> tuple[Memory, NewDataKey, Claim]:
        """A new Memory with its staged data key and its key claim, ready to save together."""
        memory_id = uuid4()
        new_key = self.keys.stage(memory_id, user_id, "memory")
        content_hash = self.content_hash(memory_id, text)
        claim = Claim(self.claim_for(user_id, scope, key), memory_id, user_id)
        memory = Memory.new(
            memory_id,
            user_id=user_id,
            scope_type=scope.scope_type,
            workspace_type=scope.workspace_type,
            memory_key=key,
            content=text,
            content_hash=content_hash,
            category=category,
            source_type=source_type,
            changed_via=changed_via,
            source_candidate_id=source_candidate_id,
            review_after=review_after,
            expires_at=expires_at,
            origin=origin,
        )
        return memory, new_key, claim

    def _change(
        self,
        memory: Memory,
        expected_revision: int | None,
        text: str,
        category: str,
        changed_via: str,
        *,
        replace: bool,
        source_candidate_id: UUID | None = None,
    ) -> Outcome:
        changed = memory.change_content(
            expected_revision=expected_revision,
            content=text,
            content_hash=self.content_hash(memory.id, text),
            category=category,
            changed_via=changed_via,
            replace=replace,
            source_candidate_id=source_candidate_id,
        )
        if not changed:
            return Outcome("unchanged", MemoryView.of(memory))
        position = self._save(memory)
        return Outcome("updated", MemoryView.of(memory), position=position)

    def _status_change(self, user_id: str, memory_id: UUID, command: Any, done: str) -> Outcome:
        def attempt() -> Outcome:
            memory = self._memory(user_id, memory_id)
            if command(memory) is False:
                return Outcome("unchanged", MemoryView.of(memory))
            position = self._save(memory)
            return Outcome(done, MemoryView.of(memory), position=position)

        return self._retrying(attempt)
