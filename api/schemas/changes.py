"""Response models of the change feed (`GET /me/changes`): ids and types, never content."""

from __future__ import annotations

from datetime import datetime
from typing import Final
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from projections.views.audit_log import CHANGE_TYPES

__all__ = ["CHANGE_EXAMPLE", "Change", "ChangePage"]

CHANGE_EXAMPLE: Final = {
    "cursor": "WyJjMSIsNDJd",
    "event_type": "memory.updated",
    "memory_id": "6f1c2a9e-8d4b-4f57-9a0e-3c2d1b0a9f87",
    "candidate_id": None,
    "revision": 2,
    "occurred_at": "2026-12-03T09:30:00Z",
}


class Change(BaseModel):
    """One change of one of the caller's memories or candidates."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [CHANGE_EXAMPLE]})

    cursor: str = Field(
        description="opaque: pass it back as `after` (or `Last-Event-ID`) to read on from here"
    )
    event_type: str = Field(
        description="one of " + ", ".join(f"`{t}`" for t in CHANGE_TYPES) + "; a forget is "
        "`memory.deleted`, after which the memory's earlier changes stay as ids only",
        examples=["memory.updated"],
    )
    memory_id: UUID | None = Field(
        description="the memory changed (for a candidate: its target or resulting memory)"
    )
    candidate_id: UUID | None = Field(description="the candidate changed, for candidate events")
    revision: int | None = Field(description="the memory's revision after the change, if any")
    occurred_at: datetime | None


class ChangePage(BaseModel):
    """The caller's changes after a cursor, in order."""

    items: list[Change]
    next_after: str = Field(
        description="pass as `after` for the next page: the last item's cursor, or the `after`"
        " given when nothing is newer (without `after`: the cursor of now)"
    )
