"""Commands on candidates: propose, accept (with edits), reject, expire (section 8, 9.3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final
from uuid import UUID, uuid4

from domain.context import retrying
from domain.errors import CandidateNotPending, InvalidInput, RevisionConflict
from domain.ledger.memories import MemoryCommands
from domain.ledger.persistence.tables import Fingerprint
from domain.ledger.results import CandidateState, MemoryState, Outcome
from domain.model.candidate import CANDIDATE_TTL, MemoryCandidate
from domain.model.memory import Memory
from domain.model.values import UNSET, Scope, check_category, check_content, check_key
from domain.model.workspace_rules import check_workspace_content

__all__ = ["REJECTION_MEMORY", "CandidateCommands"]

REJECTION_MEMORY: Final = CANDIDATE_TTL
"""How long a rejected proposal is recognised and not proposed again."""


class CandidateCommands:
    """Inferred information becomes a candidate; only the user's decision makes it a memory."""

    def __init__(self, memories: MemoryCommands, clock: Callable[[], datetime]) -> None:
        self.memories = memories
        self.store = memories.store
        self.keys = memories.keys
        self.hashes = memories.hashes
        self.clock = clock

    def propose(
        self,
        user_id: str,
        *,
        operation: str,
        scope: Scope,
        memory_key: str,
        content: str,
        category: str,
        target_memory_id: UUID | None = None,
        expected_revision: int | None = None,
        source_conversation_id: str | None = None,
    ) -> Outcome:
        """Record a proposal: `candidate_created`, `duplicate` or `previously_rejected`."""
        MemoryCandidate.check_operation(operation, target_memory_id)
        memory_key, text, category = (
            check_key(memory_key),
            check_content(content),
            check_category(category),
        )
        check_workspace_content(scope, text)

        def attempt() -> Outcome:
            revision = expected_revision
            if target_memory_id is not None:
                # Checked again on each attempt: a save that lost to the target's forget (its
                # key, naming the target, cannot be stored) ends here, in MemoryForgotten.
                target = self.store.memory(user_id, target_memory_id)
                revision = expected_revision or target.revision
            print_ = self.hashes.proposal(
                user_id, scope, memory_key, text, category, target_memory_id
            )
            now = self.clock()
            known = self._known_proposal(user_id, print_.value, now)
            if known is not None:
                state, candidate_id = known
                if state == "rejected":
                    return Outcome("previously_rejected")
                duplicate = self.store.candidate(user_id, candidate_id)
                return Outcome("duplicate", candidate=CandidateState.of(duplicate))
            candidate_id = uuid4()
            data_key = self.keys.stage(candidate_id, user_id, "candidate", target_memory_id)
            candidate = MemoryCandidate.new(
                candidate_id,
                user_id=user_id,
                operation=operation,
                target_memory_id=target_memory_id,
                expected_revision=revision,
                proposed_scope_type=scope.scope_type,
                proposed_workspace_type=scope.workspace_type,
                proposed_key=memory_key,
                proposed_content=text,
                proposed_category=category,
                source_conversation_id=source_conversation_id,
                expires_at=now + CANDIDATE_TTL,
            )
            position = self.store.save(
                candidate,
                new_keys=[data_key],
                fingerprints=[
                    Fingerprint(
                        candidate_id,
                        user_id,
                        print_.value,
                        target_memory_id,
                        "pending",
                        now,
                        print_.key_id,
                        print_.key_check,
                    )
                ],
                prune_prints_before=now - REJECTION_MEMORY,
            )
            return Outcome(
                "candidate_created", candidate=CandidateState.of(candidate), position=position
            )

        return retrying(attempt)

    def accept(
        self,
        user_id: str,
        candidate_id: UUID,
        *,
        content: str | None = None,
        category: str | None = None,
        scope_type: Any = UNSET,
        workspace_type: Any = UNSET,
    ) -> Outcome:
        """Turn a pending candidate into a memory, with optional edits; stale target: conflict."""
        text = None if content is None else check_content(content)
        category = None if category is None else check_category(category)

        def attempt() -> Outcome:
            candidate = self._pending(user_id, candidate_id)
            if candidate.operation == "create":
                return self._accept_create(candidate, text, category, scope_type, workspace_type)
            if scope_type is not UNSET or workspace_type is not UNSET:
                raise InvalidInput("scope_type", "only a create candidate's scope can be edited")
            return self._accept_change(candidate, text, category)

        return retrying(attempt)

    def reject(self, user_id: str, candidate_id: UUID) -> Outcome:
        """Reject: shred the proposal, keep its keyed fingerprint to recognise repeats."""

        def attempt() -> Outcome:
            candidate = self._pending(user_id, candidate_id)
            print_ = self.hashes.proposal(
                user_id,
                Scope(candidate.proposed_scope_type, candidate.proposed_workspace_type),
                candidate.proposed_key,
                candidate.proposed_content,
                candidate.proposed_category,
                candidate.target_memory_id,
            )
            candidate.reject()
            position = self.store.save(
                candidate,
                shred_keys=[candidate.id],
                fingerprints=[self._print(candidate, print_.value, "rejected")],
                prune_prints_before=self.clock() - REJECTION_MEMORY,
            )
            self.keys.forget_cached([candidate.id])
            return Outcome("rejected", candidate=CandidateState.of(candidate), position=position)

        return retrying(attempt)

    def expire(self, candidate_id: UUID) -> Outcome:
        """Expire a pending candidate past its expiry (a sweeper calls this); shreds it."""

        def attempt() -> Outcome:
            candidate = self.store.get(candidate_id)
            if not isinstance(candidate, MemoryCandidate) or not candidate.is_due(self.clock()):
                return Outcome("unchanged")
            return self._expire(candidate)

        return retrying(attempt)

    def get(self, user_id: str, candidate_id: UUID) -> CandidateState:
        """One of the user's candidates, in any state."""
        return CandidateState.of(self.store.candidate(user_id, candidate_id))

    # -- helpers -----------------------------------------------------------------------------

    def _pending(self, user_id: str, candidate_id: UUID) -> MemoryCandidate:
        candidate = self.store.candidate(user_id, candidate_id)
        if candidate.is_due(self.clock()):
            self._expire(candidate)
            raise CandidateNotPending("expired")
        if candidate.status != "pending":
            raise CandidateNotPending(candidate.status)
        return candidate

    def _expire(self, candidate: MemoryCandidate) -> Outcome:
        print_ = self._stored_print(candidate)
        candidate.expire()
        position = self.store.save(
            candidate,
            shred_keys=[candidate.id],
            fingerprints=[self._print(candidate, print_, "closed")],
        )
        self.keys.forget_cached([candidate.id])
        return Outcome("expired", candidate=CandidateState.of(candidate), position=position)

    def _accept_create(
        self,
        candidate: MemoryCandidate,
        text: str | None,
        category: str | None,
        scope_type: Any,
        workspace_type: Any,
    ) -> Outcome:
        if scope_type is UNSET and workspace_type is UNSET:
            scope = Scope(candidate.proposed_scope_type, candidate.proposed_workspace_type)
        else:
            scope = Scope(
                candidate.proposed_scope_type if scope_type is UNSET else scope_type,
                None if workspace_type is UNSET else workspace_type,
            )
        memory_key = check_key(candidate.proposed_key)
        final_text = text or candidate.proposed_content
        final_category = category or candidate.proposed_category
        check_workspace_content(scope, final_text)
        existing = self.store.find_by_key(candidate.user_id, scope, memory_key)
        if existing is not None:
            # Same content already live: accepting links to it; different content: conflict.
            self.memories.existing_outcome(existing, final_text)
            memory, saved = existing, []
        else:
            memory, data_key, claim = self.memories.build(
                candidate.user_id,
                scope,
                memory_key,
                final_text,
                final_category,
                "confirmed",
                "candidate",
                candidate.id,
                None,
                None,
            )
            saved = [data_key]
        candidate.accept(
            resulting_memory_id=memory.id,
            edited_content=text,
            edited_category=category,
            edited_scope_type=None if scope_type is UNSET else scope_type,
            edited_workspace_type=None if workspace_type is UNSET else workspace_type,
        )
        position = self.store.save(
            memory,
            candidate,
            new_keys=saved,
            claims=[claim] if saved else [],
            link_keys=[(candidate.id, memory.id)],
            fingerprints=[
                self._print(candidate, self._stored_print(candidate), "closed", memory.id)
            ],
        )
        return Outcome("accepted", MemoryState.of(memory), CandidateState.of(candidate), position)

    def _accept_change(
        self, candidate: MemoryCandidate, text: str | None, category: str | None
    ) -> Outcome:
        assert candidate.target_memory_id is not None
        memory: Memory = self.store.memory(candidate.user_id, candidate.target_memory_id)
        if memory.revision != candidate.expected_revision:
            raise RevisionConflict(memory.revision)
        final_text = text or candidate.proposed_content
        check_workspace_content(memory.scope, final_text)
        memory.change_content(
            expected_revision=candidate.expected_revision,
            content=final_text,
            content_hash=self.hashes.content(memory.id, final_text),
            category=category or candidate.proposed_category,
            changed_via="candidate",
            replace=candidate.operation == "replace",
            source_candidate_id=candidate.id,
        )
        candidate.accept(
            resulting_memory_id=memory.id, edited_content=text, edited_category=category
        )
        position = self.store.save(
            memory,
            candidate,
            fingerprints=[self._print(candidate, self._stored_print(candidate), "closed")],
        )
        return Outcome("accepted", MemoryState.of(memory), CandidateState.of(candidate), position)

    def _print(
        self,
        candidate: MemoryCandidate,
        fingerprint: str,
        state: str,
        subject: UUID | None = None,
    ) -> Fingerprint:
        return Fingerprint(
            candidate.id,
            candidate.user_id,
            fingerprint,
            subject or candidate.target_memory_id,
            state,
            self.clock(),
        )

    def _stored_print(self, candidate: MemoryCandidate) -> str:
        partition = self.store.partition(candidate.user_id)
        return self.store.lookups.stored_fingerprint(partition, candidate.id)

    def _known_proposal(
        self, user_id: str, fingerprint: str, now: datetime
    ) -> tuple[str, UUID] | None:
        return self.store.lookups.known_proposal(
            self.store.partition(user_id), user_id, fingerprint, now - REJECTION_MEMORY
        )
