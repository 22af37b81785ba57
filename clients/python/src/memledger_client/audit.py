"""The auditor API (`ledger.audit`): a token with the role `auditor` only (else Forbidden
`not_auditor`). The trail holds ids, scopes, revisions and keyed hashes, never content;
`replay` and `memories_as_of` read the ledger itself and show content while its key exists.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from memledger_client import _calls as calls
from memledger_client import models as m
from memledger_client._base import AsyncSender, Sender
from memledger_client._calls import Call

__all__ = ["AsyncAudit", "Audit"]

Id = UUID | str
_NDJSON = {"Accept": "application/x-ndjson"}


def _events(
    after: str | None, limit: int | None, user_id: str | None, memory_id: Id | None
) -> Call[m.AuditPage]:
    return calls.audit_events(dict(after=after, limit=limit, user_id=user_id, memory_id=memory_id))


def _replay(
    user_id: str | None,
    memory_id: Id | None,
    after: int | None,
    until: int | None,
    since: datetime | None,
    before: datetime | None,
) -> Call[m.ReplayRecord]:
    params = dict(user=user_id, memory=memory_id, after=after, until=until)
    return calls.replay(params | dict(since=since, before=before))


class Audit:
    """The auditor API of a `MemLedger`."""

    def __init__(self, client: Sender) -> None:
        self._client = client

    def events(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        user_id: str | None = None,
        memory_id: Id | None = None,
    ) -> m.AuditPage:
        """One page of the trail after the cursor `after` (None: from the start)."""
        return self._client._send(_events(after, limit, user_id, memory_id))

    def iter_events(self, after: str | None = None, **filters: Any) -> Iterator[m.AuditEvent]:
        """Every event after `after` up to now, page by page (`events`' filters)."""
        while True:
            page = self.events(after, **filters)
            yield from page.items
            if not page.items:
                return
            after = page.next_after

    def memories_as_of(
        self, user_id: str, as_of: datetime, *, memory_id: Id | None = None
    ) -> m.AsOfView:
        """A user's memories as they stood at `as_of` (forgotten since: `redacted`)."""
        return self._client._send(
            calls.memories_as_of(user_id, dict(as_of=as_of, memory=memory_id))
        )

    def replay(
        self,
        *,
        user_id: str | None = None,
        memory_id: Id | None = None,
        after: int | None = None,
        until: int | None = None,
        since: datetime | None = None,
        before: datetime | None = None,
    ) -> Iterator[m.ReplayRecord]:
        """The ledger's events as the server streams them (`memledger replay`'s lines)."""
        call = _replay(user_id, memory_id, after, until, since, before)
        with self._client._stream(call, _NDJSON, None) as response:
            for line in response.iter_lines():
                if line.strip():
                    yield call.decode(json.loads(line))


class AsyncAudit:
    """The auditor API of an `AsyncMemLedger` (the same methods as `Audit`, awaited)."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def events(
        self,
        after: str | None = None,
        *,
        limit: int | None = None,
        user_id: str | None = None,
        memory_id: Id | None = None,
    ) -> m.AuditPage:
        """One page of the trail after the cursor `after` (None: from the start)."""
        return await self._client._send(_events(after, limit, user_id, memory_id))

    async def iter_events(
        self, after: str | None = None, **filters: Any
    ) -> AsyncIterator[m.AuditEvent]:
        """Every event after `after` up to now, page by page (`events`' filters)."""
        while True:
            page = await self.events(after, **filters)
            for item in page.items:
                yield item
            if not page.items:
                return
            after = page.next_after

    async def memories_as_of(
        self, user_id: str, as_of: datetime, *, memory_id: Id | None = None
    ) -> m.AsOfView:
        """A user's memories as they stood at `as_of` (forgotten since: `redacted`)."""
        call = calls.memories_as_of(user_id, dict(as_of=as_of, memory=memory_id))
        return await self._client._send(call)

    async def replay(
        self,
        *,
        user_id: str | None = None,
        memory_id: Id | None = None,
        after: int | None = None,
        until: int | None = None,
        since: datetime | None = None,
        before: datetime | None = None,
    ) -> AsyncIterator[m.ReplayRecord]:
        """The ledger's events as the server streams them (`memledger replay`'s lines)."""
        call = _replay(user_id, memory_id, after, until, since, before)
        async with self._client._stream(call, _NDJSON, None) as response:
            async for line in response.aiter_lines():
                if line.strip():
                    yield call.decode(json.loads(line))
