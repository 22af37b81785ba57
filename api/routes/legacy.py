"""The legacy /me/memories endpoints of the Flutter client: global scope only, old fields."""

from __future__ import annotations

from fastapi import APIRouter, Path, Response

from api.deps import CurrentIdentity, MinPosition, ServicesDep
from api.schemas.memories import LegacyMemory, shaped
from api.schemas.text import LINE_PATTERN
from api.user_route import UserRoute
from domain.model.values import MAX_KEY_CHARS
from service import legacy

__all__ = ["router"]

router = APIRouter(prefix="/me/memories", tags=["legacy"], route_class=UserRoute)


@router.get("", response_model=list[LegacyMemory])
def list_global_memories(
    identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> list[LegacyMemory]:
    """The caller's active global memories as {memory_key, content, category}."""
    rows = legacy.global_memories(services, identity, min_position=at)
    return [shaped(LegacyMemory, r) for r in rows]


@router.put("", response_model=LegacyMemory)
def put_global_memory(
    body: LegacyMemory, identity: CurrentIdentity, services: ServicesDep
) -> LegacyMemory:
    """Create or replace the global memory with this key."""
    memory = legacy.put_global(services, identity, body.memory_key, body.content, body.category)
    return shaped(LegacyMemory, memory)


@router.delete("/{memory_key}", status_code=204)
def forget_global_memory(
    identity: CurrentIdentity,
    services: ServicesDep,
    memory_key: str = Path(min_length=1, max_length=MAX_KEY_CHARS, pattern=LINE_PATTERN),
) -> Response:
    """Forget the global memory with this key (irrecoverably)."""
    legacy.forget_global(services, identity, memory_key)
    return Response(status_code=204)
