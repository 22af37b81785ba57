"""Response models of the auditor replay API: the shapes `replay` returns, documented.

Times are the replay package's ISO 8601 text, passed through unchanged, so an answer is byte
for byte what `memledger replay` prints for the same ledger.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

__all__ = ["AsOfMemory", "AsOfView", "ReplayRecord"]

_EVENT_EXAMPLE: dict[str, Any] = {
    "position": 42,
    "event_id": "0b6f2c1e-58a4-4d0e-9a51-3c1f0e7d9b20",
    "event_type": "memory.created",
    "topic": "memledger:Memory.Created",
    "aggregate": "memory",
    "aggregate_id": "5f0c7a52-2a7e-4a0b-9c8e-3d1b0f6a2e11",
    "version": 1,
    "user_id": "alice",
    "scope_type": "workspace",
    "workspace_type": "learning",
    "revision": 1,
    "occurred_at": "2026-06-01T12:00:00.000000+00:00",
    "request_id": "4c1d0e2f9a8b4c7d",
    "redacted": False,
    "data": {
        "memory_key": "explanation_preference",
        "content": "I prefer examples first.",
        "category": "preference",
    },
}


class ReplayRecord(BaseModel):
    """One ledger event, as one line of `GET /audit/replay` (and of `memledger replay`)."""

    model_config = {"json_schema_extra": {"examples": [_EVENT_EXAMPLE]}}

    position: int = Field(ge=1)
    event_id: str
    event_type: str = Field(description="the audit trail's name: `memory.created`, …")
    topic: str = Field(description="the stored event's topic")
    aggregate: Literal["memory", "candidate", "settings", "access", "unknown"]
    aggregate_id: str
    version: int
    user_id: str | None
    scope_type: str | None
    workspace_type: str | None
    revision: int | None
    occurred_at: str | None = Field(description="ISO 8601")
    request_id: str | None
    redacted: bool = Field(
        description="the data key is gone (forgotten memory, rejected or expired candidate): "
        "the personal fields are left out of `data`"
    )
    data: dict[str, Any] = Field(description="the event's own fields, decrypted while possible")


class AsOfMemory(BaseModel):
    """A memory as it stood at the time asked for (the `Memory` shape, plus `redacted`)."""

    memory_id: UUID
    memory_key: str | None = Field(description="null when redacted")
    content: str | None = Field(description="null when redacted")
    category: str
    scope_type: Literal["global", "workspace"]
    workspace_type: str | None
    source_type: str
    status: Literal["active", "suppressed"]
    revision: int = Field(ge=1)
    created_at: str | None = Field(description="ISO 8601")
    updated_at: str | None
    last_confirmed_at: str | None
    review_after: str | None
    expires_at: str | None
    redacted: bool = Field(description="forgotten since: key and content are gone for good")


class AsOfView(BaseModel):
    """A user's memories at a past time, rebuilt from the ledger itself."""

    user_id: str
    as_of: str = Field(description="the time asked for, ISO 8601 in UTC")
    items: list[AsOfMemory] = Field(description="in the order the memories were created")
