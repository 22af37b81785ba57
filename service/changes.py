"""The owner's change feed (`GET /me/changes`): their memory and candidate changes, in ledger
order, ids and types only.

The source is the audit_log projection, the ledger's notification log as auditors read it
(`/audit/events`), narrowed to one user and to the changes of memories and candidates (not
reads, searches, denials or settings). It holds ids, types, revisions and times, never content,
so a forgotten memory's changes stay in the feed as what they were: ids and types, ending in
`memory.deleted` (a tombstone), however often the feed is read afterwards. One user's positions
strictly increase in commit order (the ledger's insert lock), so "after this position" loses
and repeats nothing.

The cursor is opaque: a version tag and the position, so a ledger partitioned later can encode
its positions otherwise and refuse (422) the cursors of this version it can no longer place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from domain.ledger.positions import Legacy
from projections import cursors
from projections.reads import Reads
from projections.views.audit_log import AuditLog
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads

__all__ = ["MAX_LIMIT", "Change", "ChangePage", "decode_cursor", "follow", "now", "page"]

MAX_LIMIT: Final = 1000
_TAG: Final = "c2"  # a change-feed cursor, version 2: a partitioned ledger position
_LEGACY_TAG: Final = "c1"  # version 1: a global position from before partitions


@dataclass(frozen=True, slots=True)
class Change:
    """One change of one of the user's memories or candidates (never its content)."""

    cursor: str
    event_type: str
    memory_id: UUID | None
    candidate_id: UUID | None
    revision: int | None
    occurred_at: datetime | None


@dataclass(frozen=True, slots=True)
class ChangePage:
    """Changes after a cursor, and the cursor to read on from (the same one when none)."""

    items: list[Change]
    next_after: str


def now(ports: Ports, caller: Identity) -> str:
    """The cursor of "from now": the head of the user's partition (every later change of
    theirs comes after it)."""
    return _encode(ports.ledger.position(caller.user_id))


def page(
    ports: Ports,
    caller: Identity,
    after: str | None,
    limit: int = 100,
    *,
    min_position: int | None = None,
) -> ChangePage:
    """The user's changes after the cursor `after` (None: from now, so none), at most `limit`.

    The read waits for the user's own earlier writes (and `min_position`), so a client sees the
    change it just made; changes not projected yet come with a later page.
    """
    if after is None:
        return ChangePage([], now(ports, caller))
    decode_cursor(after)
    return _read(
        ports,
        fresh_reads(ports, caller.user_id, min_position, AuditLog.name),
        caller,
        after,
        limit,
    )


def follow(ports: Ports, caller: Identity, after: str, limit: int = 100) -> ChangePage:
    """As `page`, without waiting for any projection: a stream's next look (what is not
    projected yet comes with a later look)."""
    return _read(ports, ports.reads, caller, after, limit)


def _read(ports: Ports, reads: Reads, caller: Identity, after: str, limit: int) -> ChangePage:
    position = decode_cursor(after)
    if isinstance(position, Legacy):
        position = ports.ledger.legacy_position(caller.user_id, position)
    rows = reads.changes(caller.user_id, after=position, limit=max(1, min(limit, MAX_LIMIT)))
    items = [
        Change(
            _encode(row["position"]),
            row["event_type"],
            row["memory_id"],
            row["candidate_id"],
            row["revision"],
            row["occurred_at"],
        )
        for row in rows
    ]
    return ChangePage(items, items[-1].cursor if items else after)


def decode_cursor(cursor: str) -> int | Legacy:
    """The ledger position a cursor of this feed names (`Legacy`: a version 1 cursor);
    InvalidCursor (422) for any other."""

    def parse(values: list[Any]) -> int | Legacy:
        tag, position = values
        if tag not in (_TAG, _LEGACY_TAG) or not isinstance(position, int):
            raise ValueError(cursor)
        if isinstance(position, bool) or position < 0:
            raise ValueError(cursor)
        return position if tag == _TAG else Legacy(position)

    return cursors.decode(cursor, parse)


def _encode(position: int) -> str:
    return cursors.encode(_TAG, position)
