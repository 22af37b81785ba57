"""The one entry point of a search: `MemorySearch(cache, vectors=)(reads, user_id, workspace,
text, now=)`, built once per process (api/bootstrap.py).

Below the policy check (api/routes/tools.py), a search: analyses the query once
(`retrieval.query.Query`), looks up the result cache (retrieval/cache.py, section 16), fetches
the few lexical rows that can rank (retrieval/fetch.py), adds the dense candidates when
embeddings are on (retrieval/hybrid.py), then keeps the visible rows, ranks them by calibrated
relevance (retrieval/fusion.py; the first few rescored by retrieval/rerank.py when a reranker is
configured) and cuts them to the budgets (`search` below).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from domain.model.values import Scope
from domain.policy import visible_rows, visible_scopes
from projections.reads import Reads
from retrieval.budget import ITEM_TOKENS, TOTAL_TOKENS, SearchResult, budget
from retrieval.cache import QueryCache, SearchKey, fresh_until, read_revision
from retrieval.fetch import fetch_rows
from retrieval.fusion import WEIGHTS, FusedRanker
from retrieval.query import DEFAULT_LIMIT, MAX_LIMIT, Query, SearchRow
from retrieval.rerank import Reranked, Reranker

if TYPE_CHECKING:
    from retrieval.hybrid import HybridSource

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Found",
    "MemorySearch",
    "SearchResult",
    "SearchRows",
    "search",
]


def search(
    rows: Iterable[SearchRow],
    query: Query | str,
    *,
    workspace: str,
    now: datetime,
    category: str | None = None,
    limit: int = DEFAULT_LIMIT,
    ranker: FusedRanker | Reranked | None = None,
    min_relevance: float | None = None,
) -> SearchResult:
    """Retrievable, visible rows at or above `min_relevance` (default: the threshold), ranked
    for `query`, within the limit and budgets.

    `query`: analysed by the caller (`Query.of`), or its text. `ranker`: lexical by default.
    """
    q = query if isinstance(query, Query) else Query.of(query)
    pool = [
        r for r in visible_rows(rows, workspace, now) if category is None or r.category == category
    ]
    limit = max(0, min(limit, MAX_LIMIT))
    ranker = ranker or FusedRanker({})
    ranked = ranker.rank(q, pool, now=now, min_relevance=min_relevance, limit=max(1, limit))
    return budget(ranked, limit, TOTAL_TOKENS, ITEM_TOKENS)


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
        reads: Reads,
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

    Built once (api/bootstrap.py); call it only once the policy allowed the call: it trusts
    `workspace`.
    """

    def __init__(
        self,
        cache: QueryCache[SearchKey, Found] | None = None,
        *,
        vectors: HybridSource | None = None,
        rows: SearchRows = fetch_rows,
        reranker: Reranker | None = None,
    ) -> None:
        self.cache = cache if cache is not None and cache.enabled else None
        self.vectors = vectors
        """Dense candidates when embeddings are on; None: lexical only."""
        self.rows = rows
        """The narrow fetch over the search_terms view unless another source is given."""
        self.reranker = reranker
        """Rescores the first fused candidates (retrieval/rerank.py); None: off."""

    def __call__(
        self,
        reads: Reads,
        user_id: str,
        workspace: str,
        text: str,
        *,
        now: datetime,
        category: str | None = None,
        limit: int = DEFAULT_LIMIT,
        min_relevance: float | None = None,
    ) -> Found:
        """The ranked, budgeted result for this turn (from the cache when fresh)."""
        scopes = visible_scopes(workspace)
        query = Query.of(text)
        floor = WEIGHTS.threshold if min_relevance is None else min_relevance
        args = (reads, user_id, workspace, scopes, query, now, category, limit, floor)
        if self.cache is None:
            return self._search(*args)[0]
        snapshot = read_revision(reads, user_id)
        key = SearchKey.of(
            user_id=user_id,
            workspace=workspace,
            scopes=scopes,
            query=query,
            category=category,
            limit=limit,
            revision=snapshot.revision,
            retrieval_version=f"{self.version()}/{floor:g}",
        )
        if snapshot.may_serve:
            cached = self.cache.get(key, now=now)
            if cached is not None:
                return replace(cached, cached=True)
        found, rows, version = self._search(*args)
        if snapshot.may_store:  # under the version that ranked it (lexical if vectors failed)
            hiding = reads.next_shadow_expiry(user_id, scopes, now)
            self.cache.put(
                replace(key, retrieval_version=f"{version}/{floor:g}"),
                found,
                fresh_until=fresh_until(rows, now, hiding),
            )
        return found

    def version(self) -> str:
        """The ranker as a search result names it: fusion weights, model, reranker."""
        model = self.vectors.model() if self.vectors is not None else None
        reranker = self.reranker  # left alone after a failure: the fused order is looked up
        rerank = f"/{reranker.version}" if reranker is not None and reranker.asked() else ""
        return f"{WEIGHTS.version}/{model or 'lexical'}{rerank}"

    def _search(
        self,
        reads: Reads,
        user_id: str,
        workspace: str,
        scopes: Sequence[Scope],
        query: Query,
        now: datetime,
        category: str | None,
        limit: int,
        min_relevance: float,
    ) -> tuple[Found, list[dict[str, Any]], str]:
        # hybrid: the query is embedded while the lexical rows are fetched
        vector = self.vectors.embed(query, user_id) if self.vectors is not None else None
        rows = self.rows(reads, user_id, scopes, query, now=now, category=category, limit=limit)
        dense = None
        if self.vectors is not None and vector is not None:  # add the dense candidates
            dense = self.vectors.find(
                reads,
                user_id,
                scopes,
                query,
                vector,
                now=now,
                category=category,
                lexical_revisions={r["memory_id"]: r["revision"] for r in rows},
                limit=max(1, min(limit, MAX_LIMIT)),
            )
            if dense is not None:
                rows = rows + dense.rows
        ranker = FusedRanker(dense.scores, dense.dictionary) if dense else FusedRanker({})
        ranked = Reranked(ranker, self.reranker) if self.reranker is not None else ranker
        result = search(
            [SearchRow.from_row(r) for r in rows],
            query,
            workspace=workspace,
            now=now,
            category=category,
            limit=limit,
            ranker=ranked,
            min_relevance=min_relevance,
        )
        returned = {i.row.memory_id for i in result.items}
        revisions = {r["memory_id"]: r["revision"] for r in rows if r["memory_id"] in returned}
        model = self.vectors.model() if self.vectors is not None and dense is not None else None
        tag = ranked.tag if isinstance(ranked, Reranked) else ""
        return Found(result, revisions), rows, f"{WEIGHTS.version}/{model or 'lexical'}{tag}"
