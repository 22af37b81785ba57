"""Management API: the caller's memory candidates (API_CONTRACT.md, 'Management API').

The door only: each route parses, calls its use case (service/candidates.py) and answers.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Query

from api.deps import CurrentIdentity, MinPosition, ServicesDep
from api.schemas.candidates import (
    Candidate,
    CandidateAccept,
    CandidateAccepted,
    CandidateList,
    CandidateStatus,
    candidate_out,
)
from api.schemas.memories import memory_out
from api.user_route import UserRoute
from domain.model.values import UNSET
from service import candidates

__all__ = ["router"]

router = APIRouter(prefix="/me/memory-candidates", tags=["candidates"], route_class=UserRoute)


@router.get("", response_model=CandidateList)
def list_candidates(
    identity: CurrentIdentity,
    services: ServicesDep,
    at: MinPosition,
    status_: Annotated[CandidateStatus, Query(alias="status")] = "pending",
) -> CandidateList:
    """The caller's candidates in one status (default `pending`), newest first.

    A pending candidate past its expiry is left out: it can no longer be accepted and the
    sweeper is about to mark it `expired`.
    """
    rows = candidates.in_status(services, identity, status_, min_position=at)
    return CandidateList(items=[candidate_out(r) for r in rows])


@router.post("/{candidate_id}/accept", response_model=CandidateAccepted)
def accept_candidate(
    candidate_id: UUID,
    identity: CurrentIdentity,
    services: ServicesDep,
    body: Annotated[CandidateAccept | None, Body()] = None,
) -> CandidateAccepted:
    """Accept a pending candidate, optionally edited; it becomes (or changes) a memory."""
    edits = body or CandidateAccept()
    given = edits.model_fields_set
    outcome = candidates.accept(
        services,
        identity,
        candidate_id,
        content=edits.content,
        category=edits.category,
        scope_type=edits.scope_type if "scope_type" in given else UNSET,
        workspace_type=edits.workspace_type if "workspace_type" in given else UNSET,
    )
    return CandidateAccepted(
        candidate=candidate_out(outcome.candidate), memory=memory_out(outcome.memory)
    )


@router.post("/{candidate_id}/reject", response_model=Candidate)
def reject_candidate(
    candidate_id: UUID, identity: CurrentIdentity, services: ServicesDep
) -> Candidate:
    """Reject a pending candidate: its proposal is shredded and not proposed again soon."""
    return candidate_out(candidates.reject(services, identity, candidate_id).candidate)
