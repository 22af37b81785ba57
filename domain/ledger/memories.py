"""Commands on memories: create, update, replace, reschedule, suppress, restore, confirm."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from domain.context import ClaimTaken, Retry, retrying
from domain.errors import InvalidInput, KeyExists
from domain.ledger.persistence.tables import Claim, NewDataKey
from domain.ledger.results import MemoryState, Outcome
from domain.ledger.store import AggregateStore
from domain.model.memory import Memory
from domain.model.values import (
    SOURCE_TYPES,
    UNSET,
    Scope,
    check_category,
    check_changed_via,
    check_content,
    check_key,
    check_origin,
    check_time,
)
from domain.model.workspace_rules import check_workspace_content

__all__ = ["MemoryCommands"]


class MemoryCommands:
    """What a user (or an agent on their explicit request) can do to their memories.

    Each command validates its input, then loads, calls the aggregate and saves in one
    transaction, run again on fresh state when a concurrent writer won (see `retrying`).
    """

    def __init__(self, store: AggregateStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.keys = store.keys
        self.hashes = store.hashes
        self.clock = clock

    def get(self, user_id: str, memory_id: UUID) -> MemoryState:
        """The current state of one of the user's memories (NotFound / MemoryForgotten)."""
        return MemoryState.of(self.store.memory(user_id, memory_id))

    def create(
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
        memory_key, text, category = (
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
        origin_data = check_origin(origin)

        def attempt() -> Outcome:
            # Create first: the claim's primary key refuses a taken (user, scope, key) inside
            # the save, so only a conflict pays for looking up the memory that holds it.
            memory, data_key, claim = self.build(
                user_id,
                scope,
                memory_key,
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
                position = self.store.save(memory, new_keys=[data_key], claims=[claim])
            except ClaimTaken:
                existing = self.store.find_by_key(user_id, scope, memory_key)
                if existing is None or existing.is_forgotten:  # released since: run again
                    raise
                return self.existing_outcome(existing, text)
            return Outcome("created", MemoryState.of(memory), position=position)

        return retrying(attempt)

    def put_global(
        self,
        user_id: str,
        *,
        memory_key: str,
        content: str,
        category: str,
        changed_via: str = "user_api",
    ) -> Outcome:
        """Legacy PUT: create the global memory with this key, or replace its value."""
        memory_key, text, category = (
            check_key(memory_key),
            check_content(content),
            check_category(category),
        )
        scope = Scope.global_()

        def attempt() -> Outcome:
            existing = self.store.find_by_key(user_id, scope, memory_key)
            if existing is None or existing.is_forgotten:  # a forgotten holder: released since
                try:
                    return self.create(
                        user_id,
                        scope=scope,
                        memory_key=memory_key,
                        content=text,
                        category=category,
                        changed_via=changed_via,
                    )
                except KeyExists:
                    raise Retry("the key was taken concurrently: replace its value") from None
            return self._change(existing, None, text, category, changed_via, replace=True)

        return retrying(attempt)

    def update(
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
            memory = self.store.memory(user_id, memory_id)
            memory.check_revision(expected_revision)
            if text is not None:
                check_workspace_content(memory.scope, text)
            changed = False
            if text is not None or category is not None:
                changed = memory.change_content(
                    expected_revision=expected_revision,
                    content=text if text is not None else memory.content,
                    content_hash=self.hashes.content(memory.id, text or memory.content),
                    category=category or memory.category,
                    changed_via=changed_via,
                )
            if review_after is not UNSET or expires_at is not UNSET:
                changed |= memory.reschedule(
                    review_after=memory.review_after if review_after is UNSET else review_after,
                    expires_at=memory.expires_at if expires_at is UNSET else expires_at,
                )
            if not changed:
                return Outcome("unchanged", MemoryState.of(memory))
            position = self.store.save(memory)
            return Outcome("updated", MemoryState.of(memory), position=position)

        return retrying(attempt)

    def restore_version(
        self, user_id: str, memory_id: UUID, *, revision: int, expected_revision: int
    ) -> Outcome:
        """Make an earlier version's content the newest revision."""

        def attempt() -> Outcome:
            memory = self.store.memory(user_id, memory_id)
            memory.check_revision(expected_revision)
            old = memory.find_version(revision)
            memory.restore_version(
                revision=revision,
                expected_revision=expected_revision,
                content_hash=self.hashes.content(memory.id, old.content),
                changed_via="user_api",
            )
            position = self.store.save(memory)
            return Outcome("updated", MemoryState.of(memory), position=position)

        return retrying(attempt)

    def suppress(self, user_id: str, memory_id: UUID) -> Outcome:
        """Exclude from retrieval until restored (revision unchanged)."""
        return self._status_change(user_id, memory_id, Memory.suppress, "suppressed")

    def restore(self, user_id: str, memory_id: UUID) -> Outcome:
        """Bring a suppressed memory back into retrieval (revision unchanged)."""
        return self._status_change(user_id, memory_id, Memory.restore, "restored")

    def confirm(self, user_id: str, memory_id: UUID) -> Outcome:
        """Record that the user confirmed the memory is still right."""
        return self._status_change(user_id, memory_id, Memory.confirm, "confirmed")

    # -- helpers -----------------------------------------------------------------------------

    def build(
        self,
        user_id: str,
        scope: Scope,
        memory_key: str,
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
        data_key = self.keys.stage(memory_id, user_id, "memory")
        content_hash = self.hashes.content(memory_id, text)
        hashed = self.hashes.claim(user_id, scope, memory_key)
        claim = Claim(hashed.value, memory_id, user_id, hashed.key_id, hashed.key_check)
        memory = Memory.new(
            memory_id,
            user_id=user_id,
            scope_type=scope.scope_type,
            workspace_type=scope.workspace_type,
            memory_key=memory_key,
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
        return memory, data_key, claim

    def existing_outcome(self, existing: Memory, content: str) -> Outcome:
        """A create meeting a live memory under its key: same content is done, else KeyExists."""
        if existing.has_same_content(content):
            return Outcome("unchanged", MemoryState.of(existing))
        raise KeyExists(existing.id)

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
            content_hash=self.hashes.content(memory.id, text),
            category=category,
            changed_via=changed_via,
            replace=replace,
            source_candidate_id=source_candidate_id,
        )
        if not changed:
            return Outcome("unchanged", MemoryState.of(memory))
        position = self.store.save(memory)
        return Outcome("updated", MemoryState.of(memory), position=position)

    def _status_change(self, user_id: str, memory_id: UUID, command: Any, done: str) -> Outcome:
        def attempt() -> Outcome:
            memory = self.store.memory(user_id, memory_id)
            if command(memory) is False:
                return Outcome("unchanged", MemoryState.of(memory))
            position = self.store.save(memory)
            return Outcome(done, MemoryState.of(memory), position=position)

        return retrying(attempt)
