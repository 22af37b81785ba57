"""The AccessRecord aggregate: one audit record of an agent's read, search result or denial.

Section 17 asks for `memory.read`, `memory.search` and `memory.policy_denied` in the audit trail,
never with content. Each record is its own one-event aggregate, so recording never contends
with anything and the ledger's audit projection, `GET /audit/events`, rebuilds and replay carry
them like every other event. Every field is stored in clear and none holds content, a memory
key or query text: who (`user_id`), which request (`request_id`, carried explicitly because
records are saved later, off the request thread), which tool in which workspace, which memory
(its id, scope and revision) and where it stood in the answer (`rank` of `count`), or, for a
denial, the fixed reason.

Records about no memory (an empty search, a denial) have `memory_id` None; a search that
returned n memories makes n records with ranks 1..n, so an auditor can ask which requests saw
a given memory.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final
from uuid import UUID

from eventsourcing.domain import Aggregate

__all__ = ["ACCESS_KINDS", "AccessRecord"]

ACCESS_KINDS: Final = ("read", "search", "denied")


class AccessRecord(Aggregate):
    """An access to a user's memories by an agent tool, recorded for audit only."""

    TOPIC = "memledger:AccessRecord"

    class Event(Aggregate.Event):
        """What every access record says, in clear (no content, no key, no query)."""

        user_id: str
        request_id: str | None
        tool: str
        workspace: str | None
        memory_id: UUID | None
        scope_type: str | None
        workspace_type: str | None
        revision: int | None

    class MemoryRead(Event, Aggregate.Created):
        """A memory was returned by a read tool (list): `rank` of the `count` returned."""

        TOPIC = "memledger:AccessRecord.MemoryRead"
        rank: int
        count: int

    class MemorySearched(Event, Aggregate.Created):
        """A search returned this memory at `rank` of `count` (no memory: an empty result)."""

        TOPIC = "memledger:AccessRecord.MemorySearched"
        rank: int
        count: int

    class PolicyDenied(Event, Aggregate.Created):
        """The effective permission denied a tool call; `reason` is the policy's fixed string."""

        TOPIC = "memledger:AccessRecord.PolicyDenied"
        reason: str

    Created = MemorySearched  # the library looks for a creation event under this name

    def __init__(
        self, user_id: str, request_id: str | None, tool: str, memory_id: UUID | None
    ) -> None:
        self.user_id = user_id
        self.request_id = request_id
        self.tool = tool
        self.memory_id = memory_id

    @classmethod
    def record(
        cls,
        kind: str,
        record_id: UUID,
        *,
        at: datetime,
        user_id: str,
        request_id: str | None,
        tool: str,
        workspace: str | None,
        memory_id: UUID | None = None,
        scope_type: str | None = None,
        workspace_type: str | None = None,
        revision: int | None = None,
        rank: int = 0,
        count: int = 0,
        reason: str = "",
    ) -> AccessRecord:
        """A new record of `kind` (read / search / denied) that happened `at`."""
        common: dict[str, Any] = {
            "timestamp": at,
            "user_id": user_id,
            "request_id": request_id,
            "tool": tool,
            "workspace": workspace,
            "memory_id": memory_id,
            "scope_type": scope_type,
            "workspace_type": workspace_type,
            "revision": revision,
        }
        if kind == "read":
            return cls._create(cls.MemoryRead, id=record_id, rank=rank, count=count, **common)
        if kind == "search":
            return cls._create(cls.MemorySearched, id=record_id, rank=rank, count=count, **common)
        if kind == "denied":
            return cls._create(cls.PolicyDenied, id=record_id, reason=reason, **common)
        raise ValueError(f"unknown access kind {kind!r}; one of {', '.join(ACCESS_KINDS)}")
