"""The typed rows the read facade (projections/reads.py) returns that no command returns.

One shape per concept at this boundary: the views open their sealed columns into dicts
internally and hand out frozen rows; the use cases, the agent tools and the API's output
mapping (api/schemas/) read their attributes. A memory is the ledger's `MemoryRow` (a
command's `MemoryState` is one, with its versions), a candidate its `CandidateState` (the
view stores exactly its fields); a content version is a `VersionRow` (the ledger's `Version`
does not know its memory's scope). Search ranks a narrower `retrieval.query.SearchRow` (a
memory's ranking fields plus its terms), built from the search_terms view's columns or from a
`MemoryRow` (`SearchRow.of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

__all__ = ["VersionRow", "row_of"]

R = TypeVar("R")


def row_of(cls: type[R], row: Mapping[str, Any]) -> R:
    """The dataclass `cls` from the same-named columns of an opened view row (other columns,
    such as `position`, are left out)."""
    return cls(**{f.name: row[f.name] for f in fields(cls)})  # type: ignore[arg-type]


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
        return row_of(cls, row)
