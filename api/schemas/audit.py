"""Response models of the audit API: ids, scope, revision and a keyed hash, never content."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AuditEvent", "AuditPage"]


class AuditEvent(BaseModel):
    """One ledger event as the audit trail shows it (API_CONTRACT.md, 'Audit and operations')."""

    model_config = ConfigDict(extra="forbid")

    position: int = Field(
        ge=1,
        description="the event's ledger position: it strictly increases among one user's "
        "events; across users it identifies, the page order follows commit time",
    )
    event_id: UUID
    event_type: str = Field(
        description="`memory.created`, `memory.updated`, `memory.version_restored`, "
        "`memory.suppressed`, `memory.restored`, `memory.deleted`, `memory.candidate_*`, "
        "`memory.settings_changed`, `memory.read`, `memory.search`, `memory.policy_denied`, "
        "and `memory.projection_created` / `memory.projection_removed` (the memory started or "
        "stopped feeding a profile field; these follow the event that caused them, at its "
        "position, and are deleted when the memory is forgotten)",
        examples=["memory.created"],
    )
    memory_id: UUID | None = Field(
        description="the memory concerned (for a candidate: its target or resulting memory)"
    )
    user_id: str | None
    scope_type: str | None
    workspace_type: str | None
    revision: int | None
    content_hash: str | None = Field(
        description="HMAC of the normalised content under the memory's own data key: equal "
        "hashes mean equal content of one memory; after a forget no guess can be checked"
    )
    occurred_at: datetime | None
    request_id: str | None = Field(
        description="the X-Request-ID of the HTTP request that recorded the event"
    )


class AuditPage(BaseModel):
    """A page of audit events: each partition's in position order, partitions merged by time."""

    items: list[AuditEvent]
    next_after: str = Field(
        description="pass as `after` for the next page, unchanged (an opaque cursor); the "
        "`after` given when the page is empty (poll again later with the same value)",
    )
