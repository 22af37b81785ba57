"""Agent tools over HTTP (API_CONTRACT.md, 'Agent tools'): the six memory tools a model may call.

User, workspace and mode come only from the token. Every call is checked in the contract's
order: identity (401, here), body (422, here; the domain's value checks in the use case),
policy (403), then the memory itself (404 / 410 / 409). What a tool does, sees and records is
its use case's (service/tool_reads.py, service/tool_writes.py, service/visibility.py); this
door parses the body, calls it through api/tool_calls.py (shared with MCP) and answers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api import tool_calls
from api.deps import CurrentIdentity, MinPosition, ServicesDep
from api.schemas.function_calling import FunctionTool, function_tools
from api.schemas.tools import (
    ForgetBody,
    ForgetResult,
    ListBody,
    ListResult,
    ProposeBody,
    ProposeResult,
    SaveBody,
    SaveResult,
    SearchBody,
    SearchResultOut,
    ToolSpec,
    UpdateBody,
    UpdateResult,
    tool_specs,
)
from domain.errors import NotFound

__all__ = ["router"]

router = APIRouter(prefix="/tools", tags=["agent tools"])


@router.get("", response_model=list[ToolSpec] | list[FunctionTool])
def list_tools(
    identity: CurrentIdentity,
    format: Annotated[
        Literal["default", "openai"],
        Query(description="openai: strict function-calling definitions (every field required)"),
    ] = "default",
) -> list[ToolSpec] | list[FunctionTool]:
    """Every tool with a description and a JSON Schema of its body (for function calling)."""
    return function_tools(tool_specs()) if format == "openai" else tool_specs()


@router.post("/search_core_memories", response_model=SearchResultOut)
def search_core_memories(
    body: SearchBody, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> SearchResultOut:
    """A few relevant memories within the token budget; no match: no items."""
    return tool_calls.search(services, identity, body, at)


@router.post("/list_core_memories", response_model=ListResult)
def list_core_memories(
    body: ListBody, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> ListResult:
    """The visible active, unexpired memories, newest first (at most 200)."""
    return tool_calls.list_(services, identity, body, at)


@router.post("/save_core_memory", response_model=SaveResult)
def save_core_memory(
    body: SaveBody, identity: CurrentIdentity, services: ServicesDep
) -> SaveResult:
    """Save on the user's explicit request; a new value for a taken key becomes a candidate."""
    return tool_calls.save(services, identity, body)


@router.post("/update_core_memory", response_model=UpdateResult)
def update_core_memory(
    body: UpdateBody, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> UpdateResult:
    """Correct content and/or category at the memory's current revision."""
    return tool_calls.update(services, identity, body, at)


@router.post("/forget_core_memory", response_model=ForgetResult)
def forget_core_memory(
    body: ForgetBody, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> ForgetResult:
    """Forget irrecoverably."""
    return tool_calls.forget(services, identity, body, at)


@router.post("/propose_core_memory", response_model=ProposeResult)
def propose_core_memory(
    body: ProposeBody, identity: CurrentIdentity, services: ServicesDep, at: MinPosition
) -> ProposeResult:
    """Inferred information becomes a candidate (a replace candidate when the key is taken)."""
    return tool_calls.propose(services, identity, body, at)


@router.post("/{name}", include_in_schema=False)
def unknown_tool(name: str, identity: CurrentIdentity) -> None:
    """Any other name: 404 (after the identity check, like every tool)."""
    raise NotFound(f"no tool named {name!r}")
