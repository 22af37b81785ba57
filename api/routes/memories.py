"""Management API: the caller's memories by id (API_CONTRACT.md, 'Management API').

The door only: each route parses, calls its use case (service/memories.py) and answers.
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response, status

from api.deps import CurrentIdentity, MinPosition, ServicesDep
from api.schemas.memories import (
    Category,
    MemoryCreate,
    MemoryFound,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemorySearchPage,
    VersionList,
    VersionOut,
    VersionRestore,
    WorkspaceType,
    memory_out,
)
from api.schemas.text import CURSOR_PATTERN, MAX_QUERY_CHARS, TEXT_PATTERN
from api.user_route import UserRoute
from domain.model.values import UNSET, Scope
from projections.views.active_memories import PageQuery
from service import memories, memory_search

__all__ = ["router"]

router = APIRouter(prefix="/me/core-memories", tags=["memories"], route_class=UserRoute)

_LOCATION = {
    "description": "the new memory's URL: /me/core-memories/{memory_id}",
    "schema": {"type": "string", "format": "uri-reference"},
}


@router.get(
    "",
    response_model=MemoryPage | MemorySearchPage,
    responses={
        200: {
            "description": "a page of memories (`MemoryPage`); with `q`, by relevance"
            " (`MemorySearchPage`, the example)",
        }
    },
)
def list_memories(
    identity: CurrentIdentity,
    services: ServicesDep,
    at: MinPosition,
    scope_type: Literal["global", "workspace"] | None = None,
    workspace_type: WorkspaceType | None = None,
    status_: Annotated[Literal["active", "suppressed"] | None, Query(alias="status")] = None,
    category: Category | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_QUERY_CHARS,
            pattern=TEXT_PATTERN,
            description="search: the memories ranked by relevance to this text (any language),"
            " each with its `relevance`",
        ),
    ] = None,
) -> MemoryPage | MemorySearchPage:
    """The caller's active and suppressed memories (filter by scope, status, category); with
    `q`, those that answer it, best first (the search tool's retrieval over every scope)."""
    if q is not None:
        asked = memory_search.OwnerQuery(
            q, scope_type, workspace_type, status_, category, limit, cursor
        )
        found = memory_search.search(services, identity, asked, min_position=at)
        return MemorySearchPage(
            items=[
                MemoryFound.model_validate(
                    {**memory_out(h.memory).model_dump(), "relevance": h.relevance}
                )
                for h in found.items
            ],
            next_cursor=found.next_cursor,
        )
    query: PageQuery = {
        "scope_type": scope_type,
        "workspace_type": workspace_type,
        "status": status_,
        "category": category,
        "limit": limit,
        "cursor": cursor,
    }
    page = memories.page(services, identity, query, min_position=at)
    return MemoryPage(items=[memory_out(r) for r in page.items], next_cursor=page.next_cursor)


@router.post(
    "",
    response_model=MemoryOut,
    status_code=201,
    responses={
        201: {"headers": {"Location": _LOCATION}},
        200: {"model": MemoryOut, "description": "same key and content: unchanged"},
    },
)
def create_memory(
    body: MemoryCreate,
    identity: CurrentIdentity,
    services: ServicesDep,
    request: Request,
    response: Response,
) -> MemoryOut:
    """Create an explicit memory; the same key and content again answers 200, unchanged."""
    draft = memories.Draft(
        body.memory_key,
        body.content,
        body.category,
        Scope(body.scope_type, body.workspace_type),
        review_after=body.review_after,
        expires_at=body.expires_at,
    )
    outcome = memories.create(services, identity, draft)
    memory = memory_out(outcome.memory)
    if outcome.status == "unchanged":
        response.status_code = status.HTTP_200_OK
    else:
        path = request.app.url_path_for("get_memory", memory_id=str(memory.memory_id))
        response.headers["Location"] = request.scope.get("root_path", "") + path
    return memory


@router.get("/{memory_id}", response_model=MemoryOut)
def get_memory(
    memory_id: UUID, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> MemoryOut:
    """One memory."""
    return memory_out(memories.get(services, identity, memory_id, min_position=at))


@router.patch("/{memory_id}", response_model=MemoryOut)
def update_memory(
    memory_id: UUID, body: MemoryPatch, identity: CurrentIdentity, services: ServicesDep
) -> MemoryOut:
    """Correct content or category (revision + 1) or reschedule; needs expected_revision."""
    given = body.model_fields_set
    change = memories.Edit(
        body.expected_revision,
        content=body.content,
        category=body.category,
        review_after=body.review_after if "review_after" in given else UNSET,
        expires_at=body.expires_at if "expires_at" in given else UNSET,
    )
    return memory_out(memories.edit(services, identity, memory_id, change).memory)


@router.delete("/{memory_id}", status_code=204)
def forget_memory(memory_id: UUID, identity: CurrentIdentity, services: ServicesDep) -> Response:
    """Forget irrecoverably: content, versions, candidates, profile and index are shredded."""
    memories.forget(services, identity, memory_id)
    return Response(status_code=204)


@router.post("/{memory_id}/suppress", response_model=MemoryOut)
def suppress_memory(memory_id: UUID, identity: CurrentIdentity, services: ServicesDep) -> MemoryOut:
    """Exclude from retrieval until restored (revision unchanged)."""
    return memory_out(memories.suppress(services, identity, memory_id).memory)


@router.post("/{memory_id}/restore", response_model=MemoryOut)
def restore_memory(memory_id: UUID, identity: CurrentIdentity, services: ServicesDep) -> MemoryOut:
    """Bring a suppressed memory back (revision unchanged)."""
    return memory_out(memories.restore(services, identity, memory_id).memory)


@router.get("/{memory_id}/versions", response_model=VersionList)
def list_versions(
    memory_id: UUID, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> VersionList:
    """Every content version, ascending revision."""
    rows = memories.versions(services, identity, memory_id, min_position=at)
    return VersionList(items=[VersionOut.model_validate(r) for r in rows])


@router.post("/{memory_id}/versions/{revision}/restore", response_model=MemoryOut)
def restore_version(
    memory_id: UUID,
    revision: Annotated[int, Path(ge=1)],
    body: VersionRestore,
    identity: CurrentIdentity,
    services: ServicesDep,
) -> MemoryOut:
    """That version's content becomes a new revision."""
    outcome = memories.restore_version(
        services, identity, memory_id, revision, body.expected_revision
    )
    return memory_out(outcome.memory)
