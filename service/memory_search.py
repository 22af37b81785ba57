"""The owner's search of their memories (`GET /me/core-memories?q=`): the agent search's
retrieval over the owner's view, a page at a time.

Every scope, active and suppressed memories (expired ones too, as the list shows them),
narrowed by the list's filters, ranked by the agent search's calibrated relevance
(retrieval/owner.py) and paged by an opaque cursor that names the last item's place in that
ranking. Recorded for audit like any read of the management API (`memory.read`, ids only).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final
from uuid import UUID

from domain.context import current_request_id
from domain.ledger.results import MemoryRow
from projections import cursors
from projections.views.active_memories import ActiveMemories
from projections.views.search_terms import SearchTerms
from retrieval.query import Scored
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads

__all__ = ["Found", "Hit", "OwnerQuery", "search"]

_log = logging.getLogger("memledger.api")
_TAG: Final = "q1"  # a search cursor, version 1: another kind of cursor is refused


@dataclass(frozen=True, slots=True)
class OwnerQuery:
    """The owner's search: the text, the list's filters (None: any), a page size and start."""

    text: str
    scope_type: str | None = None
    workspace_type: str | None = None
    status: str | None = None
    category: str | None = None
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """A memory found (its active_memories row) and its relevance."""

    memory: MemoryRow
    relevance: float


@dataclass(frozen=True, slots=True)
class Found:
    """A page of the ranking and the cursor of the next (None when done)."""

    items: list[Hit]
    next_cursor: str | None


def search(
    ports: Ports, caller: Identity, asked: OwnerQuery, *, min_position: int | None = None
) -> Found:
    """One page of the user's memories ranked for `asked.text`, best first."""
    after = _decode(asked.cursor) if asked.cursor else None
    with ports.limits.hold(caller.user_id, "search"):  # UserBusy past the user's searches
        reads = fresh_reads(
            ports, caller.user_id, min_position, SearchTerms.name, ActiveMemories.name
        )
        assert ports.owner_search is not None  # built once with the services
        filters = {
            "scope_type": asked.scope_type,
            "workspace_type": asked.workspace_type,
            "status": asked.status,
            "category": asked.category,
        }
        ranked = ports.owner_search(
            reads, caller.user_id, asked.text, now=ports.ledger.clock(), filters=filters
        )
        rest = _after(ranked, after)
        page, more = rest[: asked.limit], len(rest) > asked.limit
        rows = {r.memory_id: r for r in reads.memories_by_id(caller.user_id, _ids(page))}
        # A memory forgotten between the two reads has no row any more: it is left out.
        items = [Hit(rows[s.row.memory_id], s.score) for s in page if s.row.memory_id in rows]
        ports.record_read(caller.user_id, "api.search_memories", [h.memory for h in items])
    _log.info(
        "memory.owner_search items=%d ranked=%d",
        len(items),
        len(ranked),
        extra={"request_id": current_request_id(), "user_id": caller.user_id},
    )
    last = page[-1] if more and page else None
    return Found(items, _encode(last.score, last.row.memory_id) if last else None)


def _ids(page: list[Scored]) -> list[UUID]:
    return [s.row.memory_id for s in page]


def _after(ranked: list[Scored], after: tuple[float, UUID] | None) -> list[Scored]:
    """The ranking past the cursor's item; when that item moved (an edit since the last page),
    past every item of its relevance or more."""
    if after is None:
        return ranked
    score, memory_id = after
    for i, s in enumerate(ranked):
        if s.row.memory_id == memory_id and s.score == score:
            return ranked[i + 1 :]
    return [s for s in ranked if s.score < score]


def _encode(score: float, memory_id: UUID) -> str:
    return cursors.encode(_TAG, score, str(memory_id))


def _decode(cursor: str) -> tuple[float, UUID]:
    def parse(values: list[Any]) -> tuple[float, UUID]:
        tag, score, memory_id = values
        if tag != _TAG or not isinstance(score, float | int):
            raise ValueError(cursor)
        return float(score), UUID(memory_id)

    return cursors.decode(cursor, parse)
