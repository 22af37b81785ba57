"""The one entry point of a search: `MemorySearch(reads, cache)(user_id, workspace, text, now=)`.

Below the policy check (api/routes/tools.py), a search: analyses the query once
(`retrieval.query.Query`), looks up the result cache (retrieval/cache.py, section 16), fetches
the few rows that can rank (retrieval/fetch.py), adds vector evidence when embeddings are on
(retrieval/hybrid.py), then keeps the visible rows, ranks them and cuts them to the budgets
(retrieval/pipeline.py). The path, file by file: docs/retrieval.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from domain.model.values import Scope
from domain.policy import visible_scopes
from projections.reads import Reads
from retrieval.cache import QueryCache, SearchKey, fresh_until, read_revision
from retrieval.fetch import fetch_rows
from retrieval.lexical import LexicalRanker
from retrieval.pipeline import DEFAULT_LIMIT, SearchResult, search
from retrieval.query import Query
from retrieval.rows import Ranker, SearchRow

if TYPE_CHECKING:
    from retrieval.hybrid import HybridSource

__all__ = ["Found", "MemorySearch", "SearchRows"]


@dataclass(frozen=True, slots=True)
class Found:
    """A search result, the revisions of its memories (for audit), and whether it was cached."""

    result: SearchResult
    revisions: Mapping[UUID, int] = field(default_factory=dict)
    cached: bool = False


class SearchRows(Protocol):
    """Where a search's rows come from (`retrieval.fetch.fetch_rows` over `reads`)."""

    def __call__(
        self,
        user_id: str,
        scopes: Sequence[Scope],
        query: Query,
        *,
        now: datetime,
        category: str | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        """Rows of the user's memories (search_terms or active_memories columns)."""
        ...


class MemorySearch:
    """`search_core_memories` below the policy: rows, ranking, budgets, the cache.

    Call it only once the policy allowed the call: it trusts `workspace`.
    """

    def __init__(
        self,
        reads: Reads,
        cache: QueryCache[SearchKey, Found] | None = None,
        *,
        ranker: LexicalRanker | None = None,
        vectors: HybridSource | None = None,
        rows: SearchRows | None = None,
    ) -> None:
        self.reads = reads
        self.cache = cache if cache is not None and cache.enabled else None
        self.ranker = ranker or LexicalRanker()
        self.vectors = vectors
        """Vector evidence (hybrid ranking) when embeddings are on; None: lexical only."""
        self.rows: SearchRows = rows if rows is not None else partial(fetch_rows, reads)
        """The narrow fetch over the search_terms view unless another source is given."""

    def __call__(
        self,
        user_id: str,
        workspace: str,
        text: str,
        *,
        now: datetime,
        category: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> Found:
        """The ranked, budgeted result for this turn (from the cache when fresh)."""
        scopes = visible_scopes(workspace)
        query = Query.of(text)
        if self.cache is None:
            return self._search(user_id, workspace, scopes, query, now, category, limit)[0]
        snapshot = read_revision(self.reads, user_id)
        key = SearchKey.of(
            user_id=user_id,
            workspace=workspace,
            scopes=scopes,
            query=query,
            category=category,
            limit=limit,
            revision=snapshot.revision,
            retrieval_version=self._version(),
        )
        if snapshot.may_serve:
            cached = self.cache.get(key, now=now)
            if cached is not None:
                return replace(cached, cached=True)
        found, rows, version = self._search(user_id, workspace, scopes, query, now, category, limit)
        if snapshot.may_store:  # under the version that ranked it (lexical if vectors failed)
            hiding = self.reads.next_shadow_expiry(user_id, scopes, now)
            self.cache.put(
                replace(key, retrieval_version=version),
                found,
                fresh_until=fresh_until(rows, now, hiding),
            )
        return found

    def _version(self) -> str:
        return self.ranker.version if self.vectors is None else self.vectors.version(self.ranker)

    def _search(
        self,
        user_id: str,
        workspace: str,
        scopes: Sequence[Scope],
        query: Query,
        now: datetime,
        category: str | None,
        limit: int,
    ) -> tuple[Found, list[dict[str, Any]], str]:
        rows = self.rows(user_id, scopes, query, now=now, category=category, limit=limit)
        ranker: Ranker = self.ranker
        if self.vectors is not None:  # hybrid: add the vector rows, fuse the rankings
            hybrid = self.vectors.find(
                self.reads,
                self.ranker,
                user_id,
                scopes,
                query,
                now=now,
                category=category,
                lexical_revisions={r["memory_id"]: r["revision"] for r in rows},
            )
            if hybrid is not None:
                rows = rows + hybrid.rows
                ranker = hybrid.ranker
        result = search(
            [SearchRow.from_row(r) for r in rows],
            query,
            workspace=workspace,
            now=now,
            category=category,
            limit=limit,
            ranker=ranker,
        )
        returned = {i.row.memory_id for i in result.items}
        revisions = {r["memory_id"]: r["revision"] for r in rows if r["memory_id"] in returned}
        return Found(result, revisions), rows, ranker.version
