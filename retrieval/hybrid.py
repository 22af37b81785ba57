"""Dense candidates for a search: `HybridSource(service).find(...)` when embeddings are on.

It embeds the query once (the service's query cache), begun before the lexical fetch and the
read of the user's matrix so that those run while the model does (`embed`, then `find`), scores
the caller's visible memories exactly against their matrix (retrieval/vectors/store.py: kept in
memory per user), and hands the `VECTOR_POOL` most similar, with the lexical candidates that
have a current vector, to the fusion (retrieval/fusion.py) as cosine - HUBNESS x hubness, the
hubness of the query's script as the embeddings projection stored it. The pool is plain dense
top-k: no similarity floor, so every memory a dense search would return is a candidate. The
scope, status, shadowing, category and budget rules stay in `search()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import numpy as np

from domain.model.cjk import is_cjk
from domain.model.values import Scope
from projections.reads import Reads
from retrieval.fetch import hashed_terms
from retrieval.fusion import WEIGHTS, names_only_categories
from retrieval.glossary import Evidence, shared_glossary
from retrieval.query import Query
from retrieval.vectors.service import EmbeddingService, Vectors
from retrieval.vectors.store import VectorReads, visible_rows

__all__ = ["VECTOR_POOL", "Dense", "HybridSource"]

VECTOR_POOL: Final = 50
"""The dense top-k every search takes as candidates (beyond any limit a caller may ask)."""


@dataclass(frozen=True, slots=True)
class Dense:
    """One search's dense evidence: memory id -> cosine - HUBNESS x hubness, the rows of the
    dense candidates the lexical fetch did not return, and the query's dictionary evidence."""

    scores: dict[UUID, float]
    rows: list[dict[str, Any]]
    dictionary: Evidence


class HybridSource:
    """Dense evidence for `MemorySearch`; None from `find` means: rank lexically."""

    def __init__(self, service: EmbeddingService) -> None:
        self.service = service

    def model(self) -> str | None:
        """The model ranking searches now (None: the search is lexical)."""
        model = self.service.model_id
        return model if model is not None and self.service.available else None

    def embed(self, query: Query, user_id: str) -> Callable[[], Vectors | None] | None:
        """The query's vector, begun now (call the result to wait for it), or None when
        embeddings are off: the search is lexical."""
        if self.service.model_id is None:
            return None
        return self.service.start_query(query.normal, normal=True, user=user_id)

    def find(
        self,
        reads: Reads,
        user_id: str,
        scopes: Sequence[Scope],
        query: Query,
        vector: Callable[[], Vectors | None],
        *,
        now: datetime,
        category: str | None,
        lexical_revisions: Mapping[UUID, int],
        limit: int,
    ) -> Dense | None:
        """Dense candidates, or None when the query has no vector (embedder unavailable, or
        not within the budget).

        `vector`: from `embed`; the user's matrix is read (or refreshed) before waiting for
        it. `lexical_revisions`: the lexical candidates and their revisions (each gets its
        score whatever it is, if it has a vector of that revision). Of the others, only the
        rows of those that can rank within `limit` are read: a dense score more than the
        fusion can add for this query (the most its dictionary units can credit,
        `Evidence.most`, and LISTED when it only names categories) below the `limit`-th best
        cannot.
        """
        model = self.service.model_id
        if model is None:
            return None
        store = VectorReads(reads, self.service.matrices)
        dim = self.service.dimension
        # While the query is embedded: the user's matrix, its visible rows, the query's units.
        matrix = store.user_vectors(user_id, model, dim) if dim is not None else None
        shown = visible_rows(matrix, scopes, now, category) if matrix is not None else None
        dictionary = Evidence(shared_glossary(), query.normal, WEIGHTS.translated)
        hashes = hashed_terms(reads.t.seal, user_id, query)
        query_vector = vector()
        if query_vector is None:
            return None
        similar = store.similar(
            user_id,
            scopes,
            query_vector,
            model=model,
            now=now,
            limit=VECTOR_POOL,
            category=category,
            include=lexical_revisions,
            vectors=matrix,
            shown=shown,
        )
        script = int(is_cjk(query.text))
        scores = {
            m: cosine - WEIGHTS.hubness * similar.hubness[m][script]
            for m, cosine in similar.similarity.items()
        }
        ranked = sorted(scores.values(), reverse=True)
        lift = dictionary.most + (WEIGHTS.listed if names_only_categories(query) else 0.0)
        bar = ranked[limit - 1] - lift if len(ranked) >= limit else -np.inf
        rows = store.rows_of(
            user_id, {m: r for m, r in similar.pending.items() if scores[m] >= bar}, query, hashes
        )
        found = {row["memory_id"] for row in rows}
        scores = {m: d for m, d in scores.items() if m in lexical_revisions or m in found}
        return Dense(scores, rows, dictionary)
