"""The user's decisions on memory candidates (the management API): list, accept, reject."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.ledger.results import CandidateState, Outcome
from domain.model.values import UNSET
from projections.views.candidates import Candidates
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads

__all__ = ["accept", "in_status", "reject"]


def in_status(
    ports: Ports, caller: Identity, status: str, *, min_position: int | None = None
) -> list[CandidateState]:
    """The user's candidates in one status, newest first; a pending one past its expiry is
    left out (it can no longer be accepted and the sweeper is about to mark it `expired`)."""
    reads = fresh_reads(ports, caller.user_id, min_position, Candidates.name)
    rows = reads.candidates(caller.user_id, status)
    if status == "pending":
        now = ports.ledger.clock()
        rows = [r for r in rows if r.expires_at > now]
    return rows


def accept(
    ports: Ports,
    caller: Identity,
    candidate_id: UUID,
    *,
    content: str | None = None,
    category: str | None = None,
    scope_type: Any = UNSET,
    workspace_type: Any = UNSET,
) -> Outcome:
    """Accept a pending candidate, optionally edited (UNSET: the proposal's scope); it becomes
    (or changes) a memory."""
    outcome = ports.ledger.accept_candidate(
        caller.user_id,
        candidate_id,
        content=content,
        category=category,
        scope_type=scope_type,
        workspace_type=workspace_type,
    )
    ports.wrote(caller.user_id, outcome)
    ports.metrics.candidates.labels("accepted").inc()
    return outcome


def reject(ports: Ports, caller: Identity, candidate_id: UUID) -> Outcome:
    """Reject a pending candidate: its proposal is shredded and not proposed again soon."""
    outcome = ports.ledger.reject_candidate(caller.user_id, candidate_id)
    ports.metrics.candidates.labels("rejected").inc()
    return ports.wrote(caller.user_id, outcome)
