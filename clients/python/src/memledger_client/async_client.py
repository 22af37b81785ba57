"""`AsyncMemLedger`: the asyncio client of the memledger HTTP API (the same methods as
`MemLedger`, awaited; its iterators are async iterators)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar
from uuid import UUID

import httpx2

from memledger_client import _calls as calls
from memledger_client import models as m
from memledger_client._base import DEFAULT_TIMEOUT, ClientBase
from memledger_client._calls import NOT_GIVEN, Call, NotGiven
from memledger_client._feed import follow_async
from memledger_client._retry import Attempts, Retries
from memledger_client.audit import AsyncAudit
from memledger_client.tools import AsyncTools

__all__ = ["AsyncMemLedger"]

T = TypeVar("T")
Id = UUID | str


class AsyncMemLedger(ClientBase):
    """A connection to a memledger service for one bearer token (a user's or an agent turn's).

    Use it as a context manager, or call `close()`. Failed calls raise `errors.APIError`
    subclasses; 429s and 503s are retried within `retries` (see `Retries`). Reads wait for
    this client's own writes (`position`) unless `read_your_writes=False`.

        async with AsyncMemLedger("http://localhost:8000", token) as ledger:
            memory = await ledger.create_memory("language", "Answer in Python", "preference")
            async for item in ledger.iter_memories(scope_type="global"):
                print(item.memory_key, item.content)
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: Retries | None = None,
        read_your_writes: bool = True,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        super().__init__(token, retries=retries, read_your_writes=read_your_writes)
        self._http = http_client or httpx2.AsyncClient(base_url=base_url, timeout=timeout)
        self.tools = AsyncTools(self)
        """The six agent tools (an agent-turn token with a `workspace` claim)."""
        self.audit = AsyncAudit(self)
        """The auditor API (a token with the role `auditor`)."""

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemLedger:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # Management API ---------------------------------------------------------------------------

    async def list_memories(
        self,
        *,
        q: str | None = None,
        scope_type: m.ScopeType | None = None,
        workspace_type: m.WorkspaceType | None = None,
        status: Literal["active", "suppressed"] | None = None,
        category: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> m.MemoryPage:
        """One page of the owner's memories; with `q`, the owner's search (by relevance)."""
        params: dict[str, Any] = {
            "q": q,
            "scope_type": scope_type,
            "workspace_type": workspace_type,
            "status": status,
            "category": category,
            "limit": limit,
            "cursor": cursor,
        }
        return await self._send(calls.list_memories(params))

    async def iter_memories(self, **filters: Any) -> AsyncIterator[m.Memory]:
        """Every memory `list_memories(**filters)` would page through, fetched page by page."""
        cursor = filters.pop("cursor", None)
        while True:
            page = await self.list_memories(**filters, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_memory(self, memory_id: Id) -> m.Memory:
        """One memory (NotFound; Forgotten once forgotten)."""
        return await self._send(calls.get_memory(memory_id))

    async def create_memory(
        self,
        memory_key: str,
        content: str,
        category: str,
        scope_type: m.ScopeType = "global",
        workspace_type: m.WorkspaceType | None = None,
        *,
        review_after: datetime | None = None,
        expires_at: datetime | None = None,
    ) -> m.Memory:
        """Remember something; the same key, scope and content again returns the existing
        memory unchanged; different content for a taken key raises KeyExists."""
        body: dict[str, Any] = {
            "memory_key": memory_key,
            "content": content,
            "category": category,
            "scope_type": scope_type,
            "workspace_type": workspace_type,
            "review_after": review_after,
            "expires_at": expires_at,
        }
        return await self._send(calls.create_memory(body))

    async def update_memory(
        self,
        memory_id: Id,
        expected_revision: int,
        *,
        content: str | NotGiven = NOT_GIVEN,
        category: str | NotGiven = NOT_GIVEN,
        review_after: datetime | NotGiven | None = NOT_GIVEN,
        expires_at: datetime | NotGiven | None = NOT_GIVEN,
    ) -> m.Memory:
        """Correct a memory at `expected_revision` (RevisionConflict when stale); None clears
        `review_after` / `expires_at`, an argument left out keeps its value."""
        body: dict[str, Any] = {
            "expected_revision": expected_revision,
            "content": content,
            "category": category,
            "review_after": review_after,
            "expires_at": expires_at,
        }
        return await self._send(calls.update_memory(memory_id, body))

    async def forget_memory(self, memory_id: Id) -> None:
        """Forget irrecoverably; afterwards the memory answers Forgotten to its owner."""
        await self._send(calls.forget_memory(memory_id))

    async def suppress_memory(self, memory_id: Id) -> m.Memory:
        """Keep the memory but leave it out of the agents' retrieval (revision unchanged)."""
        return await self._send(calls.suppress_memory(memory_id))

    async def restore_memory(self, memory_id: Id) -> m.Memory:
        """Bring a suppressed memory back (revision unchanged)."""
        return await self._send(calls.restore_memory(memory_id))

    async def list_versions(self, memory_id: Id) -> list[m.Version]:
        """Every content version of a memory, ascending revision."""
        return await self._send(calls.list_versions(memory_id))

    async def restore_version(
        self, memory_id: Id, revision: int, expected_revision: int
    ) -> m.Memory:
        """Make an old version's content the newest revision (RevisionConflict when stale)."""
        return await self._send(calls.restore_version(memory_id, revision, expected_revision))

    # Candidates and settings ------------------------------------------------------------------

    async def list_candidates(
        self, status: Literal["pending", "accepted", "rejected", "expired"] = "pending"
    ) -> list[m.Candidate]:
        """The owner's candidates in one status, newest first."""
        return await self._send(calls.list_candidates(status))

    async def accept_candidate(
        self,
        candidate_id: Id,
        *,
        content: str | NotGiven = NOT_GIVEN,
        category: str | NotGiven = NOT_GIVEN,
        scope_type: m.ScopeType | NotGiven = NOT_GIVEN,
        workspace_type: m.WorkspaceType | NotGiven | None = NOT_GIVEN,
    ) -> m.CandidateDecision:
        """Accept a pending candidate, optionally edited (CandidateDecided if decided)."""
        edits: dict[str, Any] = {
            "content": content,
            "category": category,
            "scope_type": scope_type,
            "workspace_type": workspace_type,
        }
        return await self._send(calls.accept_candidate(candidate_id, edits))

    async def reject_candidate(self, candidate_id: Id) -> m.Candidate:
        """Reject a pending candidate; its proposal is shredded."""
        return await self._send(calls.reject_candidate(candidate_id))

    async def get_settings(self) -> m.MemorySettings:
        """The owner's memory settings."""
        return await self._send(calls.get_settings())

    async def update_settings(
        self,
        *,
        saved_memory_enabled: bool | None = None,
        auto_extract_enabled: bool | None = None,
    ) -> m.MemorySettings:
        """Switch the agents' use of memory, or their proposals, on or off."""
        body = dict(
            saved_memory_enabled=saved_memory_enabled, auto_extract_enabled=auto_extract_enabled
        )
        return await self._send(calls.update_settings(body))

    # Legacy endpoints (global scope only) -----------------------------------------------------

    async def list_global_memories(self) -> list[m.LegacyMemory]:
        """`GET /me/memories`: the active global memories, in the legacy shape."""
        return await self._send(calls.list_global_memories())

    async def put_global_memory(
        self, memory_key: str, content: str, category: str
    ) -> m.LegacyMemory:
        """`PUT /me/memories`: create or replace the global memory with this key."""
        return await self._send(calls.put_global_memory(memory_key, content, category))

    async def forget_global_memory(self, memory_key: str) -> None:
        """`DELETE /me/memories/{key}`: forget the global memory with this key (NotFound)."""
        await self._send(calls.forget_global_memory(memory_key))

    # Change feed ------------------------------------------------------------------------------

    async def changes(self, after: str | None = None, *, limit: int | None = None) -> m.ChangePage:
        """The owner's changes after the cursor `after` (None: from now, so none yet)."""
        return await self._send(calls.changes(after, limit))

    async def iter_changes(
        self, after: str, *, limit: int | None = None
    ) -> AsyncIterator[m.Change]:
        """Every change after `after` up to now, page by page; it ends once caught up."""
        while True:
            page = await self.changes(after, limit=limit)
            for item in page.items:
                yield item
            if not page.items:
                return
            after = page.next_after

    async def stream_changes(self, after: str | None = None) -> AsyncIterator[m.Change]:
        """The owner's changes as they happen (Server-Sent Events), without end.

        Starts after the cursor `after` (None: now, the moment iteration starts; pass
        `(await changes()).next_after` to fix it earlier). A dropped connection is resumed
        from the last change delivered (Last-Event-ID), within the retry budget of a call
        (reset by every change received); persist `change.cursor` to resume in another run.
        Closing the iterator (`aclose()`) closes the connection.
        """
        cursor = after if after is not None else (await self.changes()).next_after
        async for change in follow_async(self, cursor, self.retries):
            yield change

    # Sending ----------------------------------------------------------------------------------

    async def _send(self, call: Call[T]) -> T:
        return self._result(call, await self._attempt(call, stream=False))

    def _stream(
        self, call: Call[Any], headers: dict[str, str], read_timeout: float | None
    ) -> _Streamed:
        timeout = None
        if read_timeout is not None:
            timeout = httpx2.Timeout(self._http.timeout.connect, read=read_timeout)
        return _Streamed(self._attempt(call, stream=True, headers=headers, timeout=timeout))

    async def _attempt(
        self,
        call: Call[Any],
        *,
        stream: bool,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
    ) -> httpx2.Response:
        """The call's answer, retried as `Attempts` allows (a stream: still open)."""
        attempts = Attempts(call, self.retries)
        while True:
            request = self._build(self._http, call, headers, timeout)
            try:
                response = await self._http.send(request, stream=stream)
            except httpx2.TransportError as error:
                await asyncio.sleep(attempts.failed(error))
                continue
            if stream and not response.is_success:
                await response.aread()
                await response.aclose()
            pause = attempts.answered(response)
            if pause is None:
                return response
            await asyncio.sleep(pause)


class _Streamed:
    """A streamed answer, opened (with retries) on entering the `async with`, closed on
    leaving it."""

    def __init__(self, opening: Coroutine[Any, Any, httpx2.Response]) -> None:
        self._opening = opening
        self._response: httpx2.Response | None = None

    async def __aenter__(self) -> httpx2.Response:
        self._response = await self._opening
        return self._response

    async def __aexit__(self, *_: object) -> None:
        if self._response is not None:
            await self._response.aclose()
