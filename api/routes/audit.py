"""Audit API: the ledger's security trail, for auditors (API_CONTRACT.md, 'Audit and operations').

Every ledger event appears once, in ledger order, with ids, scope, revision, a keyed content hash
and the request id that recorded it; never content or memory keys. Page with `after`: each answer
carries `next_after`, the position to pass next (the given `after` again when nothing is newer).
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from api.deps import CurrentIdentity, ServicesDep
from api.schemas.audit import AuditEvent, AuditPage
from api.schemas.text import ID_PATTERN
from api.user_route import UserRoute
from domain.model.values import MAX_ID_CHARS
from service import audit

__all__ = ["router"]

router = APIRouter(prefix="/audit", tags=["audit"], route_class=UserRoute)


@router.get("/events", response_model=AuditPage)
def audit_events(
    identity: CurrentIdentity,
    services: ServicesDep,
    after: Annotated[
        str | None,
        Query(
            max_length=8000,
            description="the previous page's `next_after`, unchanged (an opaque cursor)",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="at most this many events")] = 100,
    user_id: Annotated[
        str | None, Query(max_length=MAX_ID_CHARS, pattern=ID_PATTERN, description="a user id")
    ] = None,
    memory_id: UUID | None = None,
) -> AuditPage:
    """Ledger events after `after`: each partition in order, partitions merged by time;
    `next_after` is the `after` of the next page. The answer includes every event committed
    before the request arrived (the projection is awaited, bounded; when it cannot catch up in
    time the answer is 503, never a page that silently misses events).
    """
    rows, next_after = audit.events(
        services, identity, after=after, limit=limit, user_id=user_id, memory_id=memory_id
    )
    items = [AuditEvent.model_validate(row) for row in rows]
    return AuditPage(items=items, next_after=next_after)
