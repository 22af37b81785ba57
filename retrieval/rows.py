"""A search row: a memory as retrieval ranks it, and the `Ranker` protocol over such rows.

`SearchRow.from_row` reads a search_terms row (retrieval.fetch, retrieval.vectors.store) or an
active_memories row; `terms_of` gives its document terms (stored ones when fetched).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from projections.views.terms import document_terms
from retrieval.visibility import retrievable

if TYPE_CHECKING:
    from retrieval.query import Query

__all__ = ["Ranker", "Scored", "SearchRow", "due_for_review", "terms_of"]


@dataclass(frozen=True, slots=True)
class SearchRow:
    """A memory as retrieval sees it (a search_terms or active_memories row)."""

    memory_id: UUID
    memory_key: str
    content: str
    category: str
    scope_type: str
    workspace_type: str | None
    source_type: str
    status: str
    updated_at: datetime
    review_after: datetime | None = None
    last_confirmed_at: datetime | None = None
    expires_at: datetime | None = None
    terms: frozenset[str] | None = None
    """`index_terms(memory_key, content)` when stored by the projection (else computed)."""
    key_terms: frozenset[str] | None = None
    """`key_terms(memory_key)` when stored by the projection (else computed)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SearchRow:
        """From a projection row (extra columns are ignored)."""
        values: dict[str, Any] = {name: row.get(name) for name in cls.__dataclass_fields__}
        for name in ("terms", "key_terms"):
            if values[name] is not None:
                values[name] = frozenset(values[name])
        return cls(**values)

    def is_retrievable(self, now: datetime) -> bool:
        """Active and not expired (section 9.4)."""
        return retrievable(self.status, self.expires_at, now)

    def is_due_for_review(self, now: datetime) -> bool:
        """Past `review_after` and not confirmed since: ranked below otherwise equal ones."""
        return due_for_review(self.review_after, self.last_confirmed_at, now)


def terms_of(row: SearchRow) -> frozenset[str]:
    """The row's terms: those stored by the search_terms view, else computed alike."""
    if row.terms is not None:
        return row.terms
    return document_terms(f"{row.memory_key.replace('_', ' ')} {row.content}")


def due_for_review(
    review_after: datetime | None, last_confirmed_at: datetime | None, now: datetime
) -> bool:
    """True once `review_after` has passed without a confirmation since (section 9.4)."""
    if review_after is None or review_after > now:
        return False
    return last_confirmed_at is None or last_confirmed_at < review_after


@dataclass(frozen=True, slots=True)
class Scored:
    """A matching row and its relevance (higher is better; ties are the ranker's)."""

    row: SearchRow
    score: float


class Ranker(Protocol):
    """Orders rows for a query; returns matches only, best first."""

    version: str

    def rank(self, query: Query, rows: Sequence[SearchRow], *, now: datetime) -> list[Scored]:
        """Matches only (no match: empty), best first, deterministic for equal input."""
        ...
