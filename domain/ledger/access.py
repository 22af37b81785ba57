"""Access entries: what the API records about agent reads, searches and denials (section 17).

An `AccessEntry` is taken on the request thread (cheap: no I/O) and turned into AccessRecord
aggregates later, in batches, by `AccessLog.record` (`MemoryLedger.record_access`). Entries
carry ids, scopes, revisions, ranks and fixed reasons only; nothing here can hold content, keys
or query text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Final, NamedTuple
from uuid import UUID, uuid4

from domain.context import retrying
from domain.errors import InvalidInput
from domain.ledger.store import AggregateStore
from domain.model.access import ACCESS_KINDS, AccessRecord

__all__ = [
    "AccessEntry",
    "AccessHit",
    "AccessLog",
    "access_records",
    "denial_entry",
    "result_entries",
]

_MAX_TEXT: Final = 128


class AccessHit(NamedTuple):
    """A memory that was returned: its id, scope and revision (when known)."""

    memory_id: UUID
    scope_type: str
    workspace_type: str | None
    revision: int | None = None


@dataclass(frozen=True, slots=True)
class AccessEntry:
    """One access to record: `kind` is read / search / denied."""

    kind: str
    user_id: str
    tool: str
    at: datetime
    request_id: str | None = None
    workspace: str | None = None
    memory_id: UUID | None = None
    scope_type: str | None = None
    workspace_type: str | None = None
    revision: int | None = None
    rank: int = 0
    count: int = 0
    reason: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ACCESS_KINDS:
            raise InvalidInput("kind", f"must be one of {', '.join(ACCESS_KINDS)}")
        if not self.user_id or not self.tool:
            raise InvalidInput("user_id", "user_id and tool are required")
        if self.at.tzinfo is None:
            raise InvalidInput("at", "must include a time zone")
        for name in ("tool", "request_id", "workspace", "reason"):
            value = getattr(self, name)
            if value is not None and len(value) > _MAX_TEXT:
                raise InvalidInput(name, f"must be at most {_MAX_TEXT} characters")
        if self.kind == "denied" and not self.reason:
            raise InvalidInput("reason", "a denial needs its reason")

    def details(self) -> dict[str, Any]:
        """Every field but `kind`, by name: the keywords of `AccessRecord.record`."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "kind"}


def result_entries(
    kind: str,
    *,
    user_id: str,
    tool: str,
    workspace: str | None,
    request_id: str | None,
    hits: Sequence[AccessHit],
    at: datetime,
) -> list[AccessEntry]:
    """One entry per returned memory (rank 1..n), or a single memory-less entry for none."""
    entry = AccessEntry(kind, user_id, tool, at, request_id, workspace, workspace_type=workspace)
    if not hits:
        return [entry]
    return [
        replace(
            entry,
            memory_id=hit.memory_id,
            scope_type=hit.scope_type,
            workspace_type=hit.workspace_type,
            revision=hit.revision,
            rank=rank,
            count=len(hits),
        )
        for rank, hit in enumerate(hits, start=1)
    ]


def denial_entry(
    *,
    user_id: str,
    tool: str,
    workspace: str | None,
    request_id: str | None,
    reason: str,
    at: datetime,
) -> AccessEntry:
    """The entry of a denied tool call (the agent's workspace as its workspace_type)."""
    return AccessEntry(
        "denied", user_id, tool, at, request_id, workspace, workspace_type=workspace, reason=reason
    )


def access_records(entries: Iterable[AccessEntry]) -> list[AccessRecord]:
    """New AccessRecord aggregates (fresh ids) for these entries, ready to save together."""
    return [AccessRecord.record(e.kind, uuid4(), **e.details()) for e in entries]


class AccessLog:
    """Appends access entries to the ledger as AccessRecord aggregates."""

    def __init__(self, store: AggregateStore) -> None:
        self.store = store

    def record(self, entries: Sequence[AccessEntry]) -> int | None:
        """Append audit records of agent reads, searches and denials in one transaction.

        Each entry becomes its own AccessRecord (one event, no data key, nothing sealed: they
        hold no content); returns the last position, None when there was nothing to record.
        """
        if not entries:
            return None
        return retrying(lambda: self.store.save(*access_records(entries)))
