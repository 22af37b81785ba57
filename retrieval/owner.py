"""The owner's search (`GET /me/core-memories?q=`): the agent search's ranking over the owner's
view, built once per process beside `MemorySearch` (api/bootstrap.py).

The same query analysis (`Query`), dense evidence (`HybridSource`), fusion (`FusedRanker`: the
same calibrated relevance and threshold) and reranker as `search_core_memories`; what differs
is what is ranked and what comes back:

- the rows: every live memory of the user matching the owner's filters (any scope, active or
  suppressed, expired included; `search_terms.owner_rows`), not the agent's visible, unshadowed
  few: the owner sees every memory they have, each in its own scope;
- no token budgets or item cap: the owner reads whole memories, a page at a time (the caller
  pages the ranking);
- no result cache: the owner searches rarely, and a cached ranking would need its own key.

A suppressed memory has no vector in the search matrix (it leaves it while suppressed), so it
is found by its words (and key and category) only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Final

from domain.model.values import WORKSPACES, Scope
from projections.reads import Reads
from projections.views.search_terms import owner_rows
from retrieval.fetch import hashed_terms, opened_rows
from retrieval.fusion import FusedRanker
from retrieval.query import Query, Scored, SearchRow
from retrieval.rerank import Reranked, Reranker

if TYPE_CHECKING:
    from retrieval.hybrid import HybridSource

__all__ = ["DEPTH", "OwnerSearch", "owner_scopes"]

DEPTH: Final = 50
"""The ranking the dictionary evidence is weighed for (`FusedRanker.rank`'s `limit`): exact
for the first DEPTH items, as the agent search is for its first `limit`."""


def owner_scopes(scope_type: str | None, workspace_type: str | None) -> list[Scope]:
    """The scopes the owner's filters leave: every one by default."""
    every = [Scope("global", None), *(Scope("workspace", w) for w in WORKSPACES)]
    return [
        s
        for s in every
        if scope_type in (None, s.scope_type) and workspace_type in (None, s.workspace_type)
    ]


class OwnerSearch:
    """Ranks the owner's memories for a query: all those at or above `min_relevance`."""

    def __init__(
        self, *, vectors: HybridSource | None = None, reranker: Reranker | None = None
    ) -> None:
        self.vectors = vectors
        """Dense candidates when embeddings are on (the agent search's); None: lexical only."""
        self.reranker = reranker
        """Rescores the first fused candidates, as for the agent search; None: off."""

    def __call__(
        self,
        reads: Reads,
        user_id: str,
        text: str,
        *,
        now: datetime,
        filters: Mapping[str, str | None],
        min_relevance: float | None = None,
    ) -> list[Scored]:
        """The user's memories matching `filters` (`search_terms.OWNER_FILTERS`) ranked for
        `text`, best first, at or above `min_relevance` (default: the threshold)."""
        query = Query.of(text)
        seal = reads.t.seal
        hashes = hashed_terms(seal, user_id, query)
        # the query is embedded while the user's rows are read
        vector = self.vectors.embed(query, user_id) if self.vectors is not None else None
        rows = opened_rows(owner_rows(reads, user_id, filters), seal, hashes, query)
        ranker = FusedRanker({})
        if self.vectors is not None and vector is not None and rows:
            scopes = owner_scopes(filters.get("scope_type"), filters.get("workspace_type"))
            dense = self.vectors.find(
                reads,
                user_id,
                scopes,
                query,
                vector,
                now=now,
                category=filters.get("category"),
                lexical_revisions={r["memory_id"]: r["revision"] for r in rows},
                limit=DEPTH,
            )
            if dense is not None:  # every row is a candidate already: keep their scores only
                ours = {r["memory_id"] for r in rows}
                scores = {m: s for m, s in dense.scores.items() if m in ours}
                ranker = FusedRanker(scores, dense.dictionary)
        ranked = Reranked(ranker, self.reranker) if self.reranker is not None else ranker
        candidates = [SearchRow.from_row(r) for r in rows]
        return ranked.rank(query, candidates, now=now, min_relevance=min_relevance, limit=DEPTH)
