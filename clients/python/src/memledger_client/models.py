"""The shapes the memledger API answers with (API_CONTRACT.md), one model per concept.

Models ignore fields they do not know, so a newer server adds fields without breaking an
older client. Cursors are opaque strings: pass them back exactly as received.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict

__all__ = [
    "AsOfMemory",
    "AsOfView",
    "AuditEvent",
    "AuditPage",
    "Candidate",
    "CandidateDecision",
    "Category",
    "Change",
    "ChangePage",
    "ForgetResult",
    "LegacyMemory",
    "Memory",
    "MemoryPage",
    "MemorySettings",
    "ProposeResult",
    "ReplayRecord",
    "SaveResult",
    "ScopeType",
    "SearchHit",
    "SearchResult",
    "Tool",
    "UpdateResult",
    "Version",
    "WorkspaceType",
]

ScopeType = Literal["global", "workspace"]
WorkspaceType = Literal["learning", "teaching", "research"]
Category = str
"""`preference`, `fact`, … (the server checks the list)."""
Cursor = Annotated[str, BeforeValidator(lambda value: str(value))]
"""An opaque position: the server may send a number, the client keeps it as text."""


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Memory(_Shape):
    """A remembered fact or preference (`Memory` in the contract)."""

    memory_id: UUID
    memory_key: str
    content: str
    category: Category
    scope_type: ScopeType
    workspace_type: WorkspaceType | None
    source_type: Literal["explicit", "confirmed"]
    status: Literal["active", "suppressed"]
    revision: int
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None
    review_after: datetime | None
    expires_at: datetime | None
    relevance: float | None = None
    """Set only in the owner's search results (`q=`): how likely it answers the query, 0-1."""


class MemoryPage(_Shape):
    """A page of memories; `next_cursor` is None on the last page."""

    items: list[Memory]
    next_cursor: str | None


class Version(_Shape):
    """One content version of a memory."""

    revision: int
    content: str
    category: Category
    scope_type: ScopeType
    workspace_type: WorkspaceType | None
    change_type: Literal["create", "update", "replace", "restore"]
    changed_via: Literal["user_api", "agent_tool", "candidate", "migration"]
    source_candidate_id: UUID | None
    created_at: datetime


class Candidate(_Shape):
    """A proposed memory waiting for (or past) its owner's decision."""

    candidate_id: UUID
    operation: Literal["create", "update", "replace"]
    target_memory_id: UUID | None
    expected_revision: int | None
    proposed_scope_type: ScopeType
    proposed_workspace_type: WorkspaceType | None
    proposed_key: str
    proposed_content: str
    proposed_category: Category
    source_conversation_id: str | None
    status: Literal["pending", "accepted", "rejected", "expired"]
    resulting_memory_id: UUID | None
    created_at: datetime
    decided_at: datetime | None
    expires_at: datetime


class CandidateDecision(_Shape):
    """An accepted candidate and the memory it created or changed."""

    candidate: Candidate
    memory: Memory


class MemorySettings(_Shape):
    """The owner's switches for the agent tools."""

    saved_memory_enabled: bool
    auto_extract_enabled: bool


class LegacyMemory(_Shape):
    """A global memory as the legacy `/me/memories` endpoints show it."""

    memory_key: str
    content: str
    category: Category


class Change(_Shape):
    """One entry of the change feed: ids and types only, never content."""

    cursor: Cursor
    event_type: str
    memory_id: UUID | None = None
    candidate_id: UUID | None = None
    revision: int | None = None
    occurred_at: datetime | None = None


class ChangePage(_Shape):
    """A page of the change feed; pass `next_after` as `after` to read on."""

    items: list[Change]
    next_after: Cursor


class Tool(_Shape):
    """An agent tool as a function-calling model sees it (`GET /tools`)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class SearchHit(_Shape):
    """One `search_core_memories` result: `content` may be cut to the token budget."""

    memory_id: UUID
    memory_key: str
    content: str
    category: Category
    scope_type: ScopeType
    workspace_type: WorkspaceType | None
    source_type: Literal["explicit", "confirmed"]
    updated_at: datetime
    tokens: int
    relevance: float


class SearchResult(_Shape):
    """What `search_core_memories` found, most relevant first, within the token budget."""

    items: list[SearchHit]
    total_tokens: int


class SaveResult(_Shape):
    """`save_core_memory`: `created`, `unchanged`, or `candidate_created` (key taken)."""

    status: Literal["created", "unchanged", "candidate_created"]
    memory: Memory | None = None
    candidate: Candidate | None = None


class UpdateResult(_Shape):
    """`update_core_memory`: `updated` or `unchanged`."""

    status: Literal["updated", "unchanged"]
    memory: Memory


class ForgetResult(_Shape):
    """`forget_core_memory`."""

    status: Literal["forgotten"]


class ProposeResult(_Shape):
    """`propose_core_memory`: `candidate_created`, `duplicate` or `previously_rejected`."""

    status: Literal["candidate_created", "duplicate", "previously_rejected"]
    candidate: Candidate | None = None


class AuditEvent(_Shape):
    """One ledger event in the audit trail: ids, scope, revision and a keyed hash."""

    position: int
    event_id: UUID
    event_type: str
    memory_id: UUID | None
    user_id: str | None
    scope_type: str | None
    workspace_type: str | None
    revision: int | None
    content_hash: str | None
    occurred_at: datetime | None
    request_id: str | None


class AuditPage(_Shape):
    """A page of audit events; pass `next_after` as `after` to read on."""

    items: list[AuditEvent]
    next_after: Cursor


class ReplayRecord(_Shape):
    """One ledger event as `GET /audit/replay` streams it, decrypted while its key exists."""

    position: int
    event_id: str
    event_type: str
    topic: str
    aggregate: str
    aggregate_id: str
    version: int
    user_id: str | None
    scope_type: str | None
    workspace_type: str | None
    revision: int | None
    occurred_at: str | None
    request_id: str | None
    redacted: bool
    data: dict[str, Any]


class AsOfMemory(_Shape):
    """A memory as it stood at a past time; `redacted` once forgotten since."""

    memory_id: UUID
    memory_key: str | None
    content: str | None
    category: Category
    scope_type: ScopeType
    workspace_type: str | None
    source_type: str
    status: Literal["active", "suppressed"]
    revision: int
    created_at: str | None
    updated_at: str | None
    last_confirmed_at: str | None
    review_after: str | None
    expires_at: str | None
    redacted: bool


class AsOfView(_Shape):
    """A user's memories at a past time, rebuilt from the ledger (auditors)."""

    user_id: str
    as_of: str
    items: list[AsOfMemory]
