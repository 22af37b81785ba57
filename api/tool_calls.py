"""The agent tools' translation, shared by their two doors (HTTP `/tools/*` and MCP).

Each function maps a validated body to its use case (service/tool_reads.py,
service/tool_writes.py) and the use case's result to the tool's answer schema; `TOOL_CALLS`
names them with their bodies, so a door parses the arguments, calls and serialises, and both
doors answer exactly the same JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pydantic import BaseModel

from api.schemas.candidates import candidate_out
from api.schemas.memories import memory_out
from api.schemas.tools import (
    TOOL_BODIES,
    ForgetBody,
    ForgetResult,
    ListBody,
    ListResult,
    ProposeBody,
    ProposeResult,
    SaveBody,
    SaveResult,
    SearchBody,
    SearchHit,
    SearchResultOut,
    UpdateBody,
    UpdateResult,
)
from api.services import Services
from retrieval.budget import SearchItem
from service.caller import Identity
from service.tool_reads import SearchAsked, list_memories, search_memories
from service.tool_writes import (
    Proposal,
    Saved,
    forget_memory,
    propose_memory,
    save_memory,
    update_memory,
)

__all__ = ["TOOL_CALLS", "ToolCall", "forget", "list_", "propose", "save", "search", "update"]

ToolCall = Callable[[Services, Identity, Any, int | None], BaseModel]
"""(services, caller, validated body, X-Min-Position) -> the tool's answer."""

_OWN: Final = frozenset(("tokens", "relevance"))
"""SearchHit fields that are the search's, not the row's."""


def search(
    services: Services, caller: Identity, body: SearchBody, min_position: int | None = None
) -> SearchResultOut:
    """search_core_memories."""
    asked = SearchAsked(body.query, body.category, body.limit, body.min_relevance)
    result = search_memories(services, caller, asked, min_position=min_position)
    items = [_hit(item) for item in result.items]
    return SearchResultOut(items=items, total_tokens=result.total_tokens)


def list_(
    services: Services, caller: Identity, body: ListBody, min_position: int | None = None
) -> ListResult:
    """list_core_memories."""
    rows = list_memories(services, caller, body.scope_type, min_position=min_position)
    return ListResult(items=[memory_out(row) for row in rows])


def save(
    services: Services, caller: Identity, body: SaveBody, min_position: int | None = None
) -> SaveResult:
    """save_core_memory (writes read nothing first: `min_position` has nothing to wait for)."""
    saved = save_memory(services, caller, _proposal(body))
    return SaveResult(status=saved.status, **_shown(saved))  # type: ignore[arg-type]


def update(
    services: Services, caller: Identity, body: UpdateBody, min_position: int | None = None
) -> UpdateResult:
    """update_core_memory."""
    saved = update_memory(
        services,
        caller,
        body.memory_id,
        content=body.content,
        category=body.category,
        min_position=min_position,
    )
    return UpdateResult(status=saved.status, memory=memory_out(saved.memory))  # type: ignore[arg-type]


def forget(
    services: Services, caller: Identity, body: ForgetBody, min_position: int | None = None
) -> ForgetResult:
    """forget_core_memory."""
    forget_memory(services, caller, body.memory_id, min_position=min_position)
    return ForgetResult(status="forgotten")


def propose(
    services: Services, caller: Identity, body: ProposeBody, min_position: int | None = None
) -> ProposeResult:
    """propose_core_memory."""
    saved = propose_memory(services, caller, _proposal(body), min_position=min_position)
    return ProposeResult(status=saved.status, **_shown(saved))  # type: ignore[arg-type]


TOOL_CALLS: Final[dict[str, tuple[type[BaseModel], ToolCall]]] = {
    name: (TOOL_BODIES[name], call)
    for name, call in (
        ("search_core_memories", search),
        ("list_core_memories", list_),
        ("save_core_memory", save),
        ("update_core_memory", update),
        ("forget_core_memory", forget),
        ("propose_core_memory", propose),
    )
}
"""Each tool's body schema and translation, by name."""


def _proposal(body: SaveBody | ProposeBody) -> Proposal:
    return Proposal(
        body.memory_key,
        body.content,
        body.category,
        body.scope_type,
        getattr(body, "source_conversation_id", None),
    )


def _shown(saved: Saved) -> dict[str, Any]:
    """The memory and the candidate of a write's answer, in the API's shapes, when given."""
    shown: dict[str, Any] = {}
    if saved.memory is not None:
        shown["memory"] = memory_out(saved.memory)
    if saved.candidate is not None:
        shown["candidate"] = candidate_out(saved.candidate)
    return shown


def _hit(item: SearchItem) -> SearchHit:
    row = {k: getattr(item.row, k) for k in SearchHit.model_fields if k not in _OWN}
    return SearchHit.model_validate(
        {**row, "content": item.content, "tokens": item.tokens, "relevance": item.relevance}
    )
