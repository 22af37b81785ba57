"""The typed rows the read facade (projections/reads.py) returns: a live memory, a version.

One shape per concept at this boundary: the views open their sealed columns into dicts
internally and hand out these frozen rows; the use cases, the agent tools and the API's
output mapping (api/schemas/memories.py) read their attributes. A candidate read from its view
is the ledger's own `CandidateState` (the view stores exactly its fields). Search ranks a
narrower `retrieval.query.SearchRow` (a memory's ranking fields plus its terms), built from
the search_terms view's columns or from a `MemoryRow` (`SearchRow.of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from domain.policy import retrievable

__all__ = ["MemoryRow", "VersionRow"]

R = TypeVar("R")


def _of(cls: type[R], row: Mapping[str, Any]) -> R:
    """`cls` from the same-named columns of a view row (other columns are left out)."""
    return cls(**{f.name: row[f.name] for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A live memory (active or suppressed) as the active_memories view holds it; `memory_key`
    and `content` read as REDACTED once the memory's data key is destroyed."""

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

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MemoryRow:
        """From an opened view row (its other columns, such as `position`, are left out)."""
        return _of(cls, row)

    def is_retrievable(self, now: datetime) -> bool:
        """Active and not expired: it may take part in retrieval (domain/policy.py)."""
        return retrievable(self.status, self.expires_at, now)


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One content revision of a live memory as the memory_versions view holds it."""

    revision: int
    content: str
    category: str
    scope_type: str
    workspace_type: str | None
    change_type: str
    changed_via: str
    source_candidate_id: UUID | None
    created_at: datetime

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> VersionRow:
        """From an opened view row."""
        return _of(cls, row)
