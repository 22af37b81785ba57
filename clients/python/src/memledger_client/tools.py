"""The six agent tools (`ledger.tools`), for an agent runtime holding an agent-turn token.

User, workspace and mode come from the token, never from arguments. Each method is one
`POST /tools/{name}`; `call` forwards a function-calling model's arguments as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from memledger_client import _calls as calls
from memledger_client import models as m
from memledger_client._base import AsyncSender, Sender
from memledger_client._calls import Call

__all__ = ["AsyncTools", "Tools"]

Id = UUID | str


def _search(
    query: str, category: str | None, limit: int | None, min_relevance: float | None
) -> Call[m.SearchResult]:
    args = calls.given(query=query, category=category, limit=limit, min_relevance=min_relevance)
    return calls.tool("search_core_memories", args, calls.search_result)


def _list(scope_type: str | None) -> Call[list[m.Memory]]:
    return calls.tool("list_core_memories", calls.given(scope_type=scope_type), calls.list_result)


def _save(key: str, content: str, category: str, scope_type: str) -> Call[m.SaveResult]:
    args = dict(memory_key=key, content=content, category=category, scope_type=scope_type)
    return calls.tool("save_core_memory", args, calls.save_result)


def _update(memory_id: Id, content: str | None, category: str | None) -> Call[m.UpdateResult]:
    args = calls.given(memory_id=memory_id, content=content, category=category)
    return calls.tool("update_core_memory", args, calls.update_result)


def _forget(memory_id: Id) -> Call[m.ForgetResult]:
    return calls.tool("forget_core_memory", calls.given(memory_id=memory_id), calls.forget_result)


def _propose(
    key: str, content: str, category: str, scope_type: str, conversation: str | None
) -> Call[m.ProposeResult]:
    args = calls.given(memory_key=key, content=content, category=category, scope_type=scope_type)
    args |= calls.given(source_conversation_id=conversation)
    return calls.tool("propose_core_memory", args, calls.propose_result)


class Tools:
    """The agent tools of a `MemLedger`."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def definitions(self) -> list[m.Tool]:
        """The tools with their descriptions and JSON Schemas."""
        return self._client._send(calls.list_tools())

    def function_definitions(self) -> list[dict[str, Any]]:
        """The tools as strict function-calling definitions (a chat API's `tools` list)."""
        return self._client._send(calls.function_tools())

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool by name with a model's arguments; the answer as decoded JSON."""
        return self._client._send(calls.tool(name, arguments, calls.raw))

    def search_core_memories(
        self,
        query: str,
        *,
        category: str | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
    ) -> m.SearchResult:
        """The few memories most relevant to `query`, within the token budget."""
        return self._client._send(_search(query, category, limit, min_relevance))

    def list_core_memories(self, scope_type: m.ScopeType | None = None) -> list[m.Memory]:
        """The active memories this workspace sees, newest first (at most 200)."""
        return self._client._send(_list(scope_type))

    def save_core_memory(
        self, memory_key: str, content: str, category: str, scope_type: m.ScopeType = "global"
    ) -> m.SaveResult:
        """Save what the user asked to remember (a taken key makes a replace candidate)."""
        return self._client._send(_save(memory_key, content, category, scope_type))

    def update_core_memory(
        self, memory_id: Id, *, content: str | None = None, category: str | None = None
    ) -> m.UpdateResult:
        """Correct a memory's content or category; retried only if it never left."""
        return self._client._send(_update(memory_id, content, category))

    def forget_core_memory(self, memory_id: Id) -> m.ForgetResult:
        """Forget a memory irrecoverably, on the user's request."""
        return self._client._send(_forget(memory_id))

    def propose_core_memory(
        self,
        memory_key: str,
        content: str,
        category: str,
        scope_type: m.ScopeType = "global",
        *,
        source_conversation_id: str | None = None,
    ) -> m.ProposeResult:
        """Propose an inferred memory: a candidate waiting for the user's decision."""
        call = _propose(memory_key, content, category, scope_type, source_conversation_id)
        return self._client._send(call)


class AsyncTools:
    """The agent tools of an `AsyncMemLedger` (the same methods as `Tools`, awaited)."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def definitions(self) -> list[m.Tool]:
        """The tools with their descriptions and JSON Schemas."""
        return await self._client._send(calls.list_tools())

    async def function_definitions(self) -> list[dict[str, Any]]:
        """The tools as strict function-calling definitions (a chat API's `tools` list)."""
        return await self._client._send(calls.function_tools())

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool by name with a model's arguments; the answer as decoded JSON."""
        return await self._client._send(calls.tool(name, arguments, calls.raw))

    async def search_core_memories(
        self,
        query: str,
        *,
        category: str | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
    ) -> m.SearchResult:
        """The few memories most relevant to `query`, within the token budget."""
        return await self._client._send(_search(query, category, limit, min_relevance))

    async def list_core_memories(self, scope_type: m.ScopeType | None = None) -> list[m.Memory]:
        """The active memories this workspace sees, newest first (at most 200)."""
        return await self._client._send(_list(scope_type))

    async def save_core_memory(
        self, memory_key: str, content: str, category: str, scope_type: m.ScopeType = "global"
    ) -> m.SaveResult:
        """Save what the user asked to remember (a taken key makes a replace candidate)."""
        return await self._client._send(_save(memory_key, content, category, scope_type))

    async def update_core_memory(
        self, memory_id: Id, *, content: str | None = None, category: str | None = None
    ) -> m.UpdateResult:
        """Correct a memory's content or category; retried only if it never left."""
        return await self._client._send(_update(memory_id, content, category))

    async def forget_core_memory(self, memory_id: Id) -> m.ForgetResult:
        """Forget a memory irrecoverably, on the user's request."""
        return await self._client._send(_forget(memory_id))

    async def propose_core_memory(
        self,
        memory_key: str,
        content: str,
        category: str,
        scope_type: m.ScopeType = "global",
        *,
        source_conversation_id: str | None = None,
    ) -> m.ProposeResult:
        """Propose an inferred memory: a candidate waiting for the user's decision."""
        call = _propose(memory_key, content, category, scope_type, source_conversation_id)
        return await self._client._send(call)
