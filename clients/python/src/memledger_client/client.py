"""`MemLedger`: the blocking client of the memledger HTTP API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar
from uuid import UUID

import httpx2

from memledger_client import _calls as calls
from memledger_client import models as m
from memledger_client._base import DEFAULT_TIMEOUT, ClientBase
from memledger_client._calls import NOT_GIVEN, Call, NotGiven
from memledger_client._feed import follow
from memledger_client._retry import Attempts, Retries
from memledger_client.audit import Audit
from memledger_client.tools import Tools

__all__ = ["MemLedger"]

T = TypeVar("T")
Id = UUID | str


class MemLedger(ClientBase):
    """A connection to a memledger service for one bearer token (a user's or an agent turn's).

    Use it as a context manager, or call `close()`. Failed calls raise `errors.APIError`
    subclasses; 429s and 503s are retried within `retries` (see `Retries`). Reads wait for
    this client's own writes (`position`) unless `read_your_writes=False`.

        with MemLedger("http://localhost:8000", token) as ledger:
            memory = ledger.create_memory("language", "Answer in Python", "preference")
            for item in ledger.iter_memories(scope_type="global"):
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
        http_client: httpx2.Client | None = None,
    ) -> None:
        super().__init__(token, retries=retries, read_your_writes=read_your_writes)
        self._http = http_client or httpx2.Client(base_url=base_url, timeout=timeout)
        self.tools = Tools(self)
        """The six agent tools (an agent-turn token with a `workspace` claim)."""
        self.audit = Audit(self)
        """The auditor API (a token with the role `auditor`)."""

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> MemLedger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Management API ---------------------------------------------------------------------------

    def list_memories(
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
        return self._send(calls.list_memories(params))

    def iter_memories(self, **filters: Any) -> Iterator[m.Memory]:
        """Every memory `list_memories(**filters)` would page through, fetched page by page."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list_memories(**filters, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get_memory(self, memory_id: Id) -> m.Memory:
        """One memory (NotFound; Forgotten once forgotten)."""
        return self._send(calls.get_memory(memory_id))

    def create_memory(
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
        return self._send(calls.create_memory(body))

    def update_memory(
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
        return self._send(calls.update_memory(memory_id, body))

    def forget_memory(self, memory_id: Id) -> None:
        """Forget irrecoverably; afterwards the memory answers Forgotten to its owner."""
        self._send(calls.forget_memory(memory_id))

    def suppress_memory(self, memory_id: Id) -> m.Memory:
        """Keep the memory but leave it out of the agents' retrieval (revision unchanged)."""
        return self._send(calls.suppress_memory(memory_id))

    def restore_memory(self, memory_id: Id) -> m.Memory:
        """Bring a suppressed memory back (revision unchanged)."""
        return self._send(calls.restore_memory(memory_id))

    def list_versions(self, memory_id: Id) -> list[m.Version]:
        """Every content version of a memory, ascending revision."""
        return self._send(calls.list_versions(memory_id))

    def restore_version(self, memory_id: Id, revision: int, expected_revision: int) -> m.Memory:
        """Make an old version's content the newest revision (RevisionConflict when stale)."""
        return self._send(calls.restore_version(memory_id, revision, expected_revision))

    # Candidates and settings ------------------------------------------------------------------

    def list_candidates(
        self, status: Literal["pending", "accepted", "rejected", "expired"] = "pending"
    ) -> list[m.Candidate]:
        """The owner's candidates in one status, newest first."""
        return self._send(calls.list_candidates(status))

    def accept_candidate(
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
        return self._send(calls.accept_candidate(candidate_id, edits))

    def reject_candidate(self, candidate_id: Id) -> m.Candidate:
        """Reject a pending candidate; its proposal is shredded."""
        return self._send(calls.reject_candidate(candidate_id))

    def get_settings(self) -> m.MemorySettings:
        """The owner's memory settings."""
        return self._send(calls.get_settings())

    def update_settings(
        self,
        *,
        saved_memory_enabled: bool | None = None,
        auto_extract_enabled: bool | None = None,
    ) -> m.MemorySettings:
        """Switch the agents' use of memory, or their proposals, on or off."""
        body = dict(
            saved_memory_enabled=saved_memory_enabled, auto_extract_enabled=auto_extract_enabled
        )
        return self._send(calls.update_settings(body))

    # Legacy endpoints (global scope only) -----------------------------------------------------

    def list_global_memories(self) -> list[m.LegacyMemory]:
        """`GET /me/memories`: the active global memories, in the legacy shape."""
        return self._send(calls.list_global_memories())

    def put_global_memory(self, memory_key: str, content: str, category: str) -> m.LegacyMemory:
        """`PUT /me/memories`: create or replace the global memory with this key."""
        return self._send(calls.put_global_memory(memory_key, content, category))

    def forget_global_memory(self, memory_key: str) -> None:
        """`DELETE /me/memories/{key}`: forget the global memory with this key (NotFound)."""
        self._send(calls.forget_global_memory(memory_key))

    # Change feed ------------------------------------------------------------------------------

    def changes(self, after: str | None = None, *, limit: int | None = None) -> m.ChangePage:
        """The owner's changes after the cursor `after` (None: from now, so none yet)."""
        return self._send(calls.changes(after, limit))

    def iter_changes(self, after: str, *, limit: int | None = None) -> Iterator[m.Change]:
        """Every change after `after` up to now, page by page; it ends once caught up."""
        while True:
            page = self.changes(after, limit=limit)
            yield from page.items
            if not page.items:
                return
            after = page.next_after

    def stream_changes(self, after: str | None = None) -> Iterator[m.Change]:
        """The owner's changes as they happen (Server-Sent Events), without end.

        Starts after the cursor `after` (None: now, the moment this is called). A dropped
        connection is resumed from the last change delivered (Last-Event-ID), within the retry
        budget of a call (reset by every change received); persist `change.cursor` to resume
        in another run. Closing the iterator closes the connection.
        """
        cursor = after if after is not None else self.changes().next_after
        return follow(self, cursor, self.retries)

    # Sending ----------------------------------------------------------------------------------

    def _send(self, call: Call[T]) -> T:
        return self._result(call, self._attempt(call, stream=False))

    def _stream(
        self, call: Call[Any], headers: dict[str, str], read_timeout: float | None
    ) -> _Streamed:
        timeout = None
        if read_timeout is not None:
            timeout = httpx2.Timeout(self._http.timeout.connect, read=read_timeout)
        return _Streamed(self._attempt(call, stream=True, headers=headers, timeout=timeout))

    def _attempt(
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
                response = self._http.send(request, stream=stream)
            except httpx2.TransportError as error:
                time.sleep(attempts.failed(error))
                continue
            if stream and not response.is_success:
                response.read()
                response.close()
            pause = attempts.answered(response)
            if pause is None:
                return response
            time.sleep(pause)


class _Streamed:
    """An open streamed answer, closed on leaving the `with`."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response

    def __enter__(self) -> httpx2.Response:
        return self.response

    def __exit__(self, *_: object) -> None:
        self.response.close()
