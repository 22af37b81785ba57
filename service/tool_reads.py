"""The agent tools that read: search the memories, list them.

What they see: the active, unexpired memories in `global` and the caller's workspace. Search
lets a workspace memory hide a global one with the same key; list shows both (each says its
scope). Each records for audit which memories it returned (`memory.search`, `memory.read`),
queued, never with content or query text. Search results are cached briefly
(retrieval/cache.py), by the engine built once in the composition root.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from domain import policy
from domain.context import current_request_id
from domain.ledger.access import AccessHit
from domain.ledger.results import MemoryRow
from projections.views.active_memories import ActiveMemories
from projections.views.search_terms import SearchTerms
from projections.views.user_revisions import UserRevisions
from retrieval.budget import SearchResult
from retrieval.search import DEFAULT_LIMIT
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads
from service.tool_policy import allowed

__all__ = ["LIST_LIMIT", "SearchAsked", "list_memories", "search_memories"]

_log = logging.getLogger("memledger.tools")
LIST_LIMIT: Final = 200


@dataclass(frozen=True, slots=True)
class SearchAsked:
    """A search: the query, an optional category, at most `limit` items of `min_relevance`."""

    query: str
    category: str | None = None
    limit: int = DEFAULT_LIMIT
    min_relevance: float | None = None


def search_memories(
    ports: Ports, caller: Identity, asked: SearchAsked, *, min_position: int | None = None
) -> SearchResult:
    """A few relevant memories within the token budget; no match: no items."""
    with (
        allowed(ports, caller, "search_core_memories") as workspace,
        ports.limits.hold(caller.user_id, "search"),  # UserBusy past the user's searches
    ):
        reads = fresh_reads(
            ports,
            caller.user_id,
            min_position,
            SearchTerms.name,
            UserRevisions.name,
            ActiveMemories.name,
        )
        assert ports.search is not None  # built once with the services
        found = ports.search(
            reads,
            caller.user_id,
            workspace,
            asked.query,
            now=ports.ledger.clock(),
            category=asked.category,
            limit=asked.limit,
            min_relevance=asked.min_relevance,
        )
        result = found.result
        if ports.access_log is not None:
            hits = [
                AccessHit(
                    r.memory_id, r.scope_type, r.workspace_type, found.revisions.get(r.memory_id)
                )
                for r in (i.row for i in result.items)
            ]
            ports.access_log.searched(caller.user_id, "search_core_memories", workspace, hits)
        metrics = ports.metrics
        metrics.searches.labels("hit" if result.items else "empty").inc()
        metrics.search_items.observe(len(result.items))
        metrics.search_tokens.observe(result.total_tokens)
        _log.info(
            "memory.search items=%d tokens=%d cached=%s",
            len(result.items),
            result.total_tokens,
            found.cached,
            extra={"request_id": current_request_id(), "user_id": caller.user_id},
        )
        return result


def list_memories(
    ports: Ports,
    caller: Identity,
    scope_type: str | None = None,
    *,
    min_position: int | None = None,
) -> list[MemoryRow]:
    """The visible active, unexpired memories, newest first (at most LIST_LIMIT)."""
    with allowed(ports, caller, "list_core_memories") as workspace:
        reads = fresh_reads(ports, caller.user_id, min_position, ActiveMemories.name)
        scopes = [s for s in policy.visible_scopes(workspace) if scope_type in (None, s.scope_type)]
        rows = reads.retrievable_memories(
            caller.user_id, scopes, now=ports.ledger.clock(), limit=LIST_LIMIT
        )
        ports.record_read(caller.user_id, "list_core_memories", rows, workspace=workspace)
        return rows
