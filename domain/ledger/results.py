"""What commands return: an `Outcome`, with the state of the aggregates it changed, detached;
and what the read models return of the same aggregates (`MemoryRow`, `CandidateState`).

(A user's settings hold no personal field and no history: their detached state,
`SettingsState`, is defined beside the aggregate in domain/model/memory_settings.py.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory, Version
from domain.policy import retrievable

__all__ = ["CandidateState", "MemoryRow", "MemoryState", "Outcome"]


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

S = TypeVar("S", bound="DataclassInstance")


def _snapshot(cls: type[S], aggregate: object, **differing: Any) -> S:
    """A `cls` whose fields are the aggregate's attributes of the same name, but for the values
    given in `differing` (fields the aggregate names otherwise or holds in another form)."""
    return cls(
        **{
            f.name: differing[f.name] if f.name in differing else getattr(aggregate, f.name)
            for f in fields(cls)
        }
    )


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A memory as the API's `Memory` shape shows it: what the active_memories view returns
    (projections/reads.py), and what a command's `MemoryState` holds besides its versions.
    `memory_key` and `content` read as REDACTED from a view once the data key is destroyed."""

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

    def is_retrievable(self, now: datetime) -> bool:
        """Active and not expired: it may take part in retrieval (domain/policy.py)."""
        return retrievable(self.status, self.expires_at, now)


@dataclass(frozen=True, slots=True)
class MemoryState(MemoryRow):
    """A command's detached state of a memory: its `MemoryRow` and its content versions."""

    versions: tuple[Version, ...]

    @classmethod
    def of(cls, memory: Memory) -> MemoryState:
        """Snapshot an aggregate."""
        scope = memory.scope
        return _snapshot(
            cls,
            memory,
            memory_id=memory.id,
            scope_type=scope.scope_type,
            workspace_type=scope.workspace_type,
            created_at=memory.created_on,
            versions=tuple(memory.versions),
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
        return _snapshot(cls, candidate, candidate_id=candidate.id, created_at=candidate.created_on)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did, and the ledger position to wait for before reading projections."""

    status: str
    memory: MemoryState | None = None
    candidate: CandidateState | None = None
    position: int | None = None
