"""What commands return: an `Outcome`, with the state of the aggregates it changed, detached."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory, Version
from domain.model.memory_settings import MemorySettings

__all__ = ["CandidateState", "MemoryState", "Outcome", "SettingsState"]


@dataclass(frozen=True, slots=True)
class MemoryState:
    """A memory as the API's `Memory` shape shows it."""

    memory_id: UUID
    user_id: str
    memory_key: str
    content: str
    category: str
    scope_type: str
    workspace_type: str | None
    source_type: str
    status: str
    revision: int
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None
    review_after: datetime | None
    expires_at: datetime | None
    versions: tuple[Version, ...]

    @classmethod
    def of(cls, memory: Memory) -> MemoryState:
        """Snapshot an aggregate."""
        return cls(
            memory.id,
            memory.user_id,
            memory.memory_key,
            memory.content,
            memory.category,
            memory.scope.scope_type,
            memory.scope.workspace_type,
            memory.source_type,
            memory.status,
            memory.revision,
            memory.created_on,
            memory.updated_at,
            memory.last_confirmed_at,
            memory.review_after,
            memory.expires_at,
            tuple(memory.versions),
        )


@dataclass(frozen=True, slots=True)
class CandidateState:
    """A candidate as the API's `Candidate` shape shows it."""

    candidate_id: UUID
    user_id: str
    operation: str
    target_memory_id: UUID | None
    expected_revision: int | None
    proposed_scope_type: str
    proposed_workspace_type: str | None
    proposed_key: str
    proposed_content: str
    proposed_category: str
    source_conversation_id: str | None
    status: str
    resulting_memory_id: UUID | None
    created_at: datetime
    decided_at: datetime | None
    expires_at: datetime

    @classmethod
    def of(cls, candidate: MemoryCandidate) -> CandidateState:
        """Snapshot an aggregate."""
        return cls(
            candidate.id,
            candidate.user_id,
            candidate.operation,
            candidate.target_memory_id,
            candidate.expected_revision,
            candidate.proposed_scope_type,
            candidate.proposed_workspace_type,
            candidate.proposed_key,
            candidate.proposed_content,
            candidate.proposed_category,
            candidate.source_conversation_id,
            candidate.status,
            candidate.resulting_memory_id,
            candidate.created_on,
            candidate.decided_at,
            candidate.expires_at,
        )


@dataclass(frozen=True, slots=True)
class SettingsState:
    """A user's memory settings."""

    saved_memory_enabled: bool = True
    auto_extract_enabled: bool = True

    @classmethod
    def of(cls, settings: MemorySettings | None) -> SettingsState:
        """Snapshot an aggregate (defaults when the user never changed anything)."""
        if settings is None:
            return cls()
        return cls(settings.saved_memory_enabled, settings.auto_extract_enabled)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did, and the ledger position to wait for before reading projections."""

    status: str
    memory: MemoryState | None = None
    candidate: CandidateState | None = None
    position: int | None = None
