"""Request and response models of the candidate API (API_CONTRACT.md, 'Management API')."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.memories import Category, MemoryOut, ScopeType, WorkspaceType, shaped
from api.schemas.text import Content
from domain.ledger.results import CandidateState

__all__ = [
    "Candidate",
    "CandidateAccept",
    "CandidateAccepted",
    "CandidateList",
    "CandidateStatus",
    "candidate_out",
]

CandidateStatus = Literal["pending", "accepted", "rejected", "expired"]

_REDACTED_NOTE = (
    " Reads as the placeholder `[redacted]` once the proposal was shredded: after a reject,"
    " an expiry, or when the memory it is about was forgotten."
)


class Candidate(BaseModel):
    """A proposal awaiting (or past) the user's decision (API_CONTRACT.md `Candidate`)."""

    candidate_id: UUID
    operation: Literal["create", "update", "replace"]
    target_memory_id: UUID | None = Field(
        description="The memory an update/replace would change; null for create."
    )
    expected_revision: int | None = Field(
        description="The target's revision when proposed; accepting after it changed is 409."
    )
    proposed_scope_type: ScopeType
    proposed_workspace_type: WorkspaceType | None
    proposed_key: str = Field(description="The proposed memory key." + _REDACTED_NOTE)
    proposed_content: str = Field(description="The proposed content." + _REDACTED_NOTE)
    proposed_category: str
    source_conversation_id: str | None
    status: CandidateStatus
    resulting_memory_id: UUID | None = Field(
        description="The memory the accepted candidate created or changed; null otherwise."
    )
    created_at: datetime
    decided_at: datetime | None
    expires_at: datetime


def candidate_out(source: CandidateState | None) -> Candidate:
    """From a command's or the candidates view's `CandidateState` (None only as the type of an
    `Outcome.candidate` its caller knows is set)."""
    assert source is not None, "an outcome without a candidate has none to show"
    return shaped(Candidate, source)


class CandidateList(BaseModel):
    """The caller's candidates in one status, newest first."""

    items: list[Candidate]


class CandidateAccept(BaseModel):
    """POST /me/memory-candidates/{candidate_id}/accept: optional edits before accepting.

    Omitted fields keep the proposal's value. Scope can be edited on `create` candidates only.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {},
                {
                    "content": "I prefer worked examples before definitions.",
                    "category": "preference",
                },
                {"scope_type": "workspace", "workspace_type": "learning"},
            ]
        },
    )
    content: Content | None = None
    category: Category | None = None
    scope_type: ScopeType | None = None
    workspace_type: WorkspaceType | None = Field(
        default=None, description="Required with scope_type `workspace`; null for `global`."
    )


class CandidateAccepted(BaseModel):
    """The accepted candidate and the memory it created or changed."""

    candidate: Candidate
    memory: MemoryOut
