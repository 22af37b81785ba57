"""The legacy /me/memories endpoints of the Flutter client: global scope only, old fields."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Response

from api.deps import ActiveMemoryReads, CurrentIdentity, ServicesDep
from api.schemas.memories import LegacyMemory, shaped
from api.schemas.text import LINE_PATTERN
from api.user_route import UserRoute
from domain.model.values import MAX_KEY_CHARS, Scope

__all__ = ["router"]

router = APIRouter(prefix="/me/memories", tags=["legacy"], route_class=UserRoute)


@router.get("", response_model=list[LegacyMemory])
def list_global_memories(
    identity: CurrentIdentity, reads: ActiveMemoryReads, services: ServicesDep
) -> list[LegacyMemory]:
    """The caller's active global memories as {memory_key, content, category}."""
    found: list[LegacyMemory] = []
    returned: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = reads.memories(
            identity.user_id, scope_type="global", status="active", limit=200, cursor=cursor
        )
        returned += page.items
        found += [shaped(LegacyMemory, r) for r in page.items]
        if page.next_cursor is None:
            services.record_read(identity.user_id, "api.legacy_list_memories", returned)
            return found
        cursor = page.next_cursor


@router.put("", response_model=LegacyMemory)
def put_global_memory(
    body: LegacyMemory, identity: CurrentIdentity, services: ServicesDep
) -> LegacyMemory:
    """Create or replace the global memory with this key."""
    outcome = services.ledger.put_global_memory(
        identity.user_id,
        memory_key=body.memory_key,
        content=body.content,
        category=body.category,
    )
    memory = services.wrote(identity.user_id, outcome).memory
    assert memory is not None
    return LegacyMemory(
        memory_key=memory.memory_key, content=memory.content, category=memory.category
    )  # type: ignore[arg-type]


@router.delete("/{memory_key}", status_code=204)
def forget_global_memory(
    identity: CurrentIdentity,
    services: ServicesDep,
    memory_key: str = Path(min_length=1, max_length=MAX_KEY_CHARS, pattern=LINE_PATTERN),
) -> Response:
    """Forget the global memory with this key (irrecoverably)."""
    outcome = services.ledger.forget_by_key(identity.user_id, Scope.global_(), memory_key)
    services.wrote(identity.user_id, outcome)
    return Response(status_code=204)
