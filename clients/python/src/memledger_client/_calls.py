"""Every endpoint as a `Call`: method, path, query, body, how to read the answer, and whether
repeating it is safe. The sync and async clients only send them (one place for the API).

Repeat safety (`idempotent`) decides what is retried after an answer that leaves the outcome
unknown (503, a connection lost after the request went out). Reads are always safe. Writes are
safe here when a second copy cannot change more than the first:
  - creates and saves are deduplicated by key, scope and content (the same again: unchanged),
  - PUT, settings and suppress/restore set a state (setting it twice is setting it once),
  - PATCH, version restore and candidate decisions are conditional (`expected_revision`, a
    candidate must be pending): a second copy after the first landed fails with a Conflict
    rather than applying twice,
  - forgets are done once gone: a retry answering 410 (404 for the legacy key) is success.
The one unguarded write is the agent tool `update_core_memory` (no revision): a copy arriving
after someone else's change would overwrite it, so it is retried only when it never left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

from pydantic import BaseModel, TypeAdapter

from memledger_client import models as m

__all__ = ["NOT_GIVEN", "Call", "NotGiven"]

T = TypeVar("T")
B = TypeVar("B", bound=BaseModel)


class NotGiven(Enum):
    """Marks an argument left out, where None means "clear it" (`expires_at=None`)."""

    NOT_GIVEN = "NOT_GIVEN"

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven.NOT_GIVEN


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request to make and how to turn its answer into `T`."""

    method: str
    path: str
    decode: Callable[[Any], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None
    idempotent: bool = True
    """Safe to repeat when the first attempt's outcome is unknown (see the module doc)."""
    gone_means_done: int | None = None
    """A forget: this status on a repeated attempt means an earlier attempt did it."""


def _model(model: type[B]) -> Callable[[Any], B]:
    return model.model_validate


def _list_of(model: type[B]) -> Callable[[Any], list[B]]:
    return TypeAdapter(list[model]).validate_python  # type: ignore[valid-type]


def _items(model: type[B]) -> Callable[[Any], list[B]]:
    adapter = TypeAdapter(list[model])  # type: ignore[valid-type]
    return lambda body: adapter.validate_python(body["items"])


def _nothing(_: Any) -> None:
    return None


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value


def given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (neither None nor NOT_GIVEN), JSON-ready."""
    return {k: _json(v) for k, v in fields.items() if v is not None and v is not NOT_GIVEN}


def given_or_null(**fields: Any) -> dict[str, Any]:
    """The fields that were given, None included (sent as null: "clear it")."""
    return {k: _json(v) for k, v in fields.items() if v is not NOT_GIVEN}


def _memory(memory_id: UUID | str) -> str:
    return f"/me/core-memories/{quote(str(memory_id), safe='')}"


# Management API -------------------------------------------------------------------------------


def list_memories(params: dict[str, Any]) -> Call[m.MemoryPage]:
    return Call("GET", "/me/core-memories", _model(m.MemoryPage), given(**params))


def get_memory(memory_id: UUID | str) -> Call[m.Memory]:
    return Call("GET", _memory(memory_id), _model(m.Memory))


def create_memory(body: dict[str, Any]) -> Call[m.Memory]:
    return Call("POST", "/me/core-memories", _model(m.Memory), body=given(**body))


def update_memory(memory_id: UUID | str, body: dict[str, Any]) -> Call[m.Memory]:
    path = _memory(memory_id)
    return Call("PATCH", path, _model(m.Memory), body=given_or_null(**body))


def forget_memory(memory_id: UUID | str) -> Call[None]:
    return Call("DELETE", _memory(memory_id), _nothing, gone_means_done=410)


def suppress_memory(memory_id: UUID | str) -> Call[m.Memory]:
    return Call("POST", f"{_memory(memory_id)}/suppress", _model(m.Memory))


def restore_memory(memory_id: UUID | str) -> Call[m.Memory]:
    return Call("POST", f"{_memory(memory_id)}/restore", _model(m.Memory))


def list_versions(memory_id: UUID | str) -> Call[list[m.Version]]:
    return Call("GET", f"{_memory(memory_id)}/versions", _items(m.Version))


def restore_version(memory_id: UUID | str, revision: int, expected: int) -> Call[m.Memory]:
    path = f"{_memory(memory_id)}/versions/{int(revision)}/restore"
    return Call("POST", path, _model(m.Memory), body={"expected_revision": expected})


def changes(after: str | None, limit: int | None) -> Call[m.ChangePage]:
    return Call("GET", "/me/changes", _model(m.ChangePage), given(after=after, limit=limit))


# Candidates and settings ----------------------------------------------------------------------


def list_candidates(status: str) -> Call[list[m.Candidate]]:
    params = {"status": status}
    return Call("GET", "/me/memory-candidates", _items(m.Candidate), params)


def accept_candidate(candidate_id: UUID | str, edits: dict[str, Any]) -> Call[m.CandidateDecision]:
    path = f"/me/memory-candidates/{quote(str(candidate_id), safe='')}/accept"
    return Call("POST", path, _model(m.CandidateDecision), body=given_or_null(**edits))


def reject_candidate(candidate_id: UUID | str) -> Call[m.Candidate]:
    path = f"/me/memory-candidates/{quote(str(candidate_id), safe='')}/reject"
    return Call("POST", path, _model(m.Candidate))


def get_settings() -> Call[m.MemorySettings]:
    return Call("GET", "/me/memory-settings", _model(m.MemorySettings))


def update_settings(body: dict[str, Any]) -> Call[m.MemorySettings]:
    return Call("PATCH", "/me/memory-settings", _model(m.MemorySettings), body=given(**body))


# Legacy (global scope only) ------------------------------------------------------------------


def list_global_memories() -> Call[list[m.LegacyMemory]]:
    return Call("GET", "/me/memories", _list_of(m.LegacyMemory))


def put_global_memory(key: str, content: str, category: str) -> Call[m.LegacyMemory]:
    body = {"memory_key": key, "content": content, "category": category}
    return Call("PUT", "/me/memories", _model(m.LegacyMemory), body=body)


def forget_global_memory(key: str) -> Call[None]:
    path = f"/me/memories/{quote(key, safe='')}"
    return Call("DELETE", path, _nothing, gone_means_done=404)


# Agent tools ---------------------------------------------------------------------------------


def list_tools() -> Call[list[m.Tool]]:
    return Call("GET", "/tools", _list_of(m.Tool))


def function_tools() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/tools", _list_of_json, {"format": "openai"})


def _list_of_json(body: Any) -> list[dict[str, Any]]:
    return list(body)


def tool(name: str, arguments: Mapping[str, Any], decode: Callable[[Any], T]) -> Call[T]:
    """`POST /tools/{name}`; only `update_core_memory` is not safe to repeat."""
    unguarded = name == "update_core_memory"
    path = f"/tools/{quote(name, safe='')}"
    gone = 410 if name == "forget_core_memory" else None
    body = {k: _json(v) for k, v in arguments.items()}
    return Call("POST", path, decode, body=body, idempotent=not unguarded, gone_means_done=gone)


def raw(body: Any) -> Any:
    """The answer as decoded JSON (`call_tool`)."""
    return body


search_result = _model(m.SearchResult)
list_result = _items(m.Memory)
save_result = _model(m.SaveResult)
update_result = _model(m.UpdateResult)
forget_result = _model(m.ForgetResult)
propose_result = _model(m.ProposeResult)


# Audit ---------------------------------------------------------------------------------------


def audit_events(params: dict[str, Any]) -> Call[m.AuditPage]:
    return Call("GET", "/audit/events", _model(m.AuditPage), given(**params))


def memories_as_of(user_id: str, params: dict[str, Any]) -> Call[m.AsOfView]:
    path = f"/audit/users/{quote(user_id, safe='')}/memories"
    return Call("GET", path, _model(m.AsOfView), given(**params))


def replay(params: dict[str, Any]) -> Call[m.ReplayRecord]:
    """`GET /audit/replay`: JSON lines, each decoded on its own (see the clients)."""
    return Call("GET", "/audit/replay", _model(m.ReplayRecord), given(**params))
