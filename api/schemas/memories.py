"""Request and response models of the management and legacy memory APIs."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.text import Content, Key
from domain.ledger.results import MemoryRow
from domain.model.values import Category
from domain.model.values import Workspace as WorkspaceType
from projections.rows import VersionRow

__all__ = [
    "Category",
    "LegacyMemory",
    "MemoryCreate",
    "MemoryFields",
    "MemoryFound",
    "MemoryOut",
    "MemoryPage",
    "MemoryPatch",
    "MemorySearchPage",
    "VersionList",
    "VersionOut",
    "VersionRestore",
    "WorkspaceType",
    "memory_out",
    "shaped",
    "version_out",
]

ScopeType = Literal["global", "workspace"]
M = TypeVar("M", bound=BaseModel)
_KEY = Field(examples=["explanation_preference"])
_CONTENT = Field(examples=["我更喜欢先看例子再看定义。"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryFields(BaseModel):
    """The fields every response shape of a memory starts with: what it is, says and where."""

    memory_id: UUID
    memory_key: str
    content: str
    category: str
    scope_type: ScopeType
    workspace_type: WorkspaceType | None
    source_type: Literal["explicit", "confirmed"]


class MemoryOut(MemoryFields):
    """A memory (API_CONTRACT.md `Memory`)."""

    status: Literal["active", "suppressed"]
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime | None
    review_after: datetime | None
    expires_at: datetime | None


def shaped(model: type[M], source: object) -> M:
    """`model` from the same-named attributes of a typed row or state (`MemoryRow`,
    `MemoryState`, `CandidateState`, ...); anything else the source holds is left out."""
    return model.model_validate({name: getattr(source, name) for name in model.model_fields})


def memory_out(source: MemoryRow | None) -> MemoryOut:
    """The API's `Memory` from a read-model row or a command's state (a `MemoryRow` too): the
    one mapping.

    (None only as the type of an `Outcome.memory` its caller knows is set.)"""
    assert source is not None, "an outcome without a memory has none to show"
    return shaped(MemoryOut, source)


class MemoryCreate(_Strict):
    """POST /me/core-memories."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "memory_key": "explanation_preference",
                    "content": "I prefer examples first.",
                    "category": "preference",
                    "scope_type": "workspace",
                    "workspace_type": "learning",
                }
            ]
        },
    )
    memory_key: Key = _KEY
    content: Content = _CONTENT
    category: Category
    scope_type: ScopeType
    workspace_type: WorkspaceType | None = None
    review_after: datetime | None = None
    expires_at: datetime | None = None


class MemoryPatch(_Strict):
    """PATCH /me/core-memories/{memory_id}: only the fields given change."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"expected_revision": 1, "content": "Examples first."}]},
    )
    expected_revision: int = Field(ge=1)
    content: Content | None = None
    category: Category | None = None
    review_after: datetime | None = None
    expires_at: datetime | None = None


class MemoryPage(BaseModel):
    """A page of memories."""

    items: list[MemoryOut]
    next_cursor: str | None


class MemoryFound(MemoryOut):
    """A memory the owner's search found, with its relevance."""

    relevance: float = Field(
        ge=0,
        le=1,
        description="how likely it answers the query (0-1, calibrated as the search tool's;"
        " items are ordered by it)",
    )


class MemorySearchPage(BaseModel):
    """A page of the owner's search (`q`): memories by relevance, best first."""

    items: list[MemoryFound]
    next_cursor: str | None


class VersionOut(BaseModel):
    """One content version."""

    revision: int
    content: str
    category: str
    scope_type: ScopeType
    workspace_type: WorkspaceType | None
    change_type: Literal["create", "update", "replace", "restore"]
    changed_via: Literal["user_api", "agent_tool", "candidate", "migration"]
    source_candidate_id: UUID | None
    created_at: datetime


def version_out(source: VersionRow) -> VersionOut:
    """The API's version from a read-model row."""
    return shaped(VersionOut, source)


class VersionList(BaseModel):
    """Versions in ascending revision."""

    items: list[VersionOut]


class VersionRestore(_Strict):
    """POST /me/core-memories/{memory_id}/versions/{revision}/restore."""

    expected_revision: int = Field(ge=1, examples=[3])


class LegacyMemory(_Strict):
    """The legacy /me/memories shape (global scope only)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"memory_key": "language", "content": "Answer in Python", "category": "preference"}
            ]
        },
    )
    memory_key: Key = _KEY
    content: Content = _CONTENT
    category: Category
