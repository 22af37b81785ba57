"""The MemoryCandidate aggregate: inferred information awaiting the user's decision (section 8)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar, Final
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.errors import CandidateNotPending, InvalidInput
from domain.model.events import REDACTED, PersonalData
from domain.model.values import check_id

__all__ = ["CANDIDATE_TTL", "OPERATIONS", "MemoryCandidate"]

CANDIDATE_TTL: Final = timedelta(days=30)
OPERATIONS: Final = ("create", "update", "replace")


class MemoryCandidate(Aggregate):
    """A proposal to create, update or replace a memory; never a live memory itself."""

    TOPIC = "memledger:MemoryCandidate"

    class Event(Aggregate.Event, PersonalData):
        """Base of candidate events: each says in clear whose candidate it is."""

        user_id: str

    class Proposed(Event, Aggregate.Created):
        """An agent proposed a memory; its text is sealed with the candidate's data key."""

        TOPIC = "memledger:MemoryCandidate.Proposed"
        PERSONAL: ClassVar[tuple[str, ...]] = ("proposed_key", "proposed_content")
        operation: str
        target_memory_id: UUID | None
        expected_revision: int | None
        proposed_scope_type: str
        proposed_workspace_type: str | None
        proposed_key: str
        proposed_content: str
        proposed_category: str
        source_conversation_id: str | None
        expires_at: datetime

    Created = Proposed  # the library looks for the creation event under this name

    class Accepted(Event):
        """The user accepted, possibly after editing content, category or scope."""

        TOPIC = "memledger:MemoryCandidate.Accepted"
        PERSONAL: ClassVar[tuple[str, ...]] = ("edited_content",)
        resulting_memory_id: UUID
        edited_content: str | None
        edited_category: str | None
        edited_scope_type: str | None
        edited_workspace_type: str | None

        def apply(self, aggregate: Any) -> None:
            aggregate._decide("accepted", self.timestamp)
            aggregate.resulting_memory_id = self.resulting_memory_id

    class Rejected(Event):
        """The user rejected it; the proposal is shredded.

        Its keyed fingerprint lives only in the fingerprint table, for 30 days (section 9), never
        in the log: version 1 carried it, and reading one drops it."""

        TOPIC = "memledger:MemoryCandidate.Rejected"
        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.pop("fingerprint", None)

        def apply(self, aggregate: Any) -> None:
            aggregate._decide("rejected", self.timestamp)
            aggregate._shred()

    class Expired(Event):
        """Nobody decided within the candidate's lifetime; its proposal is shredded."""

        TOPIC = "memledger:MemoryCandidate.Expired"

        def apply(self, aggregate: Any) -> None:
            aggregate._decide("expired", self.timestamp)
            aggregate._shred()

    def __init__(
        self,
        user_id: str,
        operation: str,
        target_memory_id: UUID | None,
        expected_revision: int | None,
        proposed_scope_type: str,
        proposed_workspace_type: str | None,
        proposed_key: str,
        proposed_content: str,
        proposed_category: str,
        source_conversation_id: str | None,
        expires_at: datetime,
    ) -> None:
        self.user_id = user_id
        self.operation = operation
        self.target_memory_id = target_memory_id
        self.expected_revision = expected_revision
        self.proposed_scope_type = proposed_scope_type
        self.proposed_workspace_type = proposed_workspace_type
        self.proposed_key = proposed_key
        self.proposed_content = proposed_content
        self.proposed_category = proposed_category
        self.source_conversation_id = source_conversation_id
        self.expires_at = expires_at
        self.status = "pending"
        self.decided_at: datetime | None = None
        self.resulting_memory_id: UUID | None = None

    @classmethod
    def new(cls, candidate_id: UUID, **fields: Any) -> MemoryCandidate:
        """Create a candidate under an id chosen beforehand (its data key is made first)."""
        # Both are stored in clear (unsealed): a value a projection cannot store stalls it.
        check_id("user_id", fields["user_id"])
        if fields.get("source_conversation_id") is not None:
            check_id("source_conversation_id", fields["source_conversation_id"])
        return cls._create(cls.Proposed, id=candidate_id, **fields)

    @staticmethod
    def check_operation(operation: str, target_memory_id: UUID | None) -> None:
        """`create` has no target; `update` and `replace` need one."""
        if operation not in OPERATIONS:
            raise InvalidInput("operation", f"must be one of {', '.join(OPERATIONS)}")
        if (operation == "create") != (target_memory_id is None):
            raise InvalidInput("target_memory_id", "required for update/replace, and only for them")

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Trigger an event stamped with the candidate's owner."""
        super().trigger_event(event_class, user_id=self.user_id, **kwargs)

    def is_due(self, now: datetime) -> bool:
        """True when a pending candidate has outlived its expiry."""
        return self.status == "pending" and now >= self.expires_at

    def accept(
        self,
        *,
        resulting_memory_id: UUID,
        edited_content: str | None = None,
        edited_category: str | None = None,
        edited_scope_type: str | None = None,
        edited_workspace_type: str | None = None,
    ) -> None:
        """Record the decision to accept (the memory write is saved in the same transaction)."""
        self._require_pending()
        self.trigger_event(
            self.Accepted,
            resulting_memory_id=resulting_memory_id,
            edited_content=edited_content,
            edited_category=edited_category,
            edited_scope_type=edited_scope_type,
            edited_workspace_type=edited_workspace_type,
        )

    def reject(self) -> None:
        """Record the rejection; the caller shreds the proposal's data key in the same save and
        keeps the proposal's fingerprint (outside the log) to recognise a repeat."""
        self._require_pending()
        self.trigger_event(self.Rejected)

    def expire(self) -> None:
        """Record that the candidate expired undecided."""
        self._require_pending()
        self.trigger_event(self.Expired)

    def _require_pending(self) -> None:
        if self.status != "pending":
            raise CandidateNotPending(self.status)

    def _shred(self) -> None:
        # The proposal's data key is destroyed with this event: its text is gone from now on.
        self.proposed_key = REDACTED
        self.proposed_content = REDACTED

    def _decide(self, status: str, at: datetime) -> None:
        self.status = status
        self.decided_at = at
