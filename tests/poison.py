"""Events the projections cannot apply, committed below every value check (as if they had
got into the ledger somehow): the quarantine tests' poison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID, uuid4

from psycopg import Cursor

from domain.ledger.ledger import MemoryLedger
from domain.model.candidate import CANDIDATE_TTL, MemoryCandidate
from projections.envelope import Envelope
from projections.tracking import Tables
from projections.views.active_memories import ActiveMemories

NUL_CONVERSATION = "c\u0000d"
"""PostgreSQL text cannot hold NUL: the candidates projection cannot store this."""


def propose_with_nul(ledger: MemoryLedger, user_id: str, key: str = "poison") -> int:
    """A candidate proposal whose source_conversation_id holds NUL; returns its position.

    Built from the aggregate, its recorded event altered, and saved through the ledger's store,
    so that the API's, the commands' and the aggregate's checks (which refuse NUL) cannot stop it.
    """
    candidate_id = uuid4()
    new_key = ledger.candidates.keys.stage(candidate_id, user_id, "candidate")
    candidate = MemoryCandidate.new(
        candidate_id,
        user_id=user_id,
        operation="create",
        target_memory_id=None,
        expected_revision=None,
        proposed_scope_type="global",
        proposed_workspace_type=None,
        proposed_key=key,
        proposed_content="a secret proposal text",
        proposed_category="preference",
        source_conversation_id="c-d",
        expires_at=ledger.clock() + CANDIDATE_TTL,
    )
    # The aggregate refuses NUL too: poison the recorded event itself, below every check.
    created = candidate._pending_events[-1]  # the library's list of unsaved events
    object.__setattr__(created, "source_conversation_id", NUL_CONVERSATION)
    position = ledger.candidates.store.save(candidate, new_keys=[new_key])
    assert position is not None
    return position


class FailingActiveMemories(ActiveMemories):
    """active_memories whose handler raises on the events of the aggregates in `poison`."""

    def __init__(self, poison: set[UUID]) -> None:
        self.poison = poison

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        if any(e.originator_id in self.poison for e in batch):
            raise ValueError("the handler cannot apply this event")
        super().apply(cur, t, batch)
