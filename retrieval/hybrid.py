"""Dense candidates for a search: `HybridSource(service).find(...)` when embeddings are on.

It embeds the query once (the service's query cache), scores the caller's visible memories
exactly against their matrix (retrieval/vectors/store.py: kept in memory per user), and hands
the `pool` most similar, with the lexical candidates that have a current vector, to the fusion
(retrieval/fusion.py) as cosine - HUBNESS x hubness. The pool is plain dense top-k: no
similarity floor, so every memory a dense search would return is a candidate. The scope,
status, shadowing, category and budget rules stay in `search()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import numpy as np

from domain.model.cjk import is_cjk
from domain.model.values import Scope
from projections.reads import Reads
from retrieval.calibration import Background
from retrieval.fusion import WEIGHTS, Weights
from retrieval.glossary import Evidence, Glossary, shared_glossary
from retrieval.query import Query
from retrieval.vectors.service import EmbeddingService
from retrieval.vectors.store import VectorReads

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

    def __init__(
        self,
        service: EmbeddingService,
        weights: Weights = WEIGHTS,
        glossary: Glossary | None = None,
    ) -> None:
        self.service = service
        self.background = Background(service)
        self.weights = weights
        self.glossary = glossary if glossary is not None else shared_glossary()
        """Bilingual evidence (retrieval/glossary.py); the process's shared one by default."""

    def model(self) -> str | None:
        """The model ranking searches now (None: the search is lexical)."""
        model = self.service.model_id
        return model if model is not None and self.service.available else None

    def find(
        self,
        reads: Reads,
        user_id: str,
        scopes: Sequence[Scope],
        query: Query,
        *,
        now: datetime,
        category: str | None,
        lexical_revisions: Mapping[UUID, int],
        limit: int,
    ) -> Dense | None:
        """Dense candidates, or None when embeddings are unavailable.

        `lexical_revisions`: the lexical candidates and their revisions (each gets its score
        whatever it is, if it has a vector of that revision). Of the others, only the rows of
        those that can rank within `limit` are read: a dense score more than TRANSLATED +
        LISTED (all the fusion can add) below the `limit`-th best cannot.
        """
        model = self.service.model_id
        vector = (
            self.service.query(query.normal, normal=True, user=user_id)
            if model is not None
            else None
        )
        if vector is None or model is None:
            return None
        similar = VectorReads(reads, self.service.matrices).similar(
            user_id,
            scopes,
            vector,
            model=model,
            now=now,
            min_similarity=-np.inf,
            limit=VECTOR_POOL,
            category=category,
            include=lexical_revisions,
            fetch=False,
        )
        ids = list(similar.vectors)
        matrix = (
            np.stack([similar.vectors[m] for m in ids])
            if ids
            else np.zeros((0, vector.shape[-1]), dtype=np.float32)
        )
        hubness = self.background.hubness(matrix, cjk_query=is_cjk(query.text))
        if hubness is None:
            return None
        scores = {
            m: similar.similarity[m] - self.weights.hubness * h
            for m, h in zip(ids, hubness.tolist(), strict=True)
            if m in similar.similarity
        }
        ranked = sorted(scores.values(), reverse=True)
        room = self.weights.translated + self.weights.listed
        bar = ranked[limit - 1] - room if len(ranked) >= limit else -np.inf
        wanted = {m: r for m, r in similar.pending.items() if scores.get(m, -np.inf) >= bar}
        rows = VectorReads(reads, self.service.matrices).rows_of(user_id, wanted)
        found = {row["memory_id"] for row in rows}
        scores = {m: d for m, d in scores.items() if m in lexical_revisions or m in found}
        dictionary = Evidence(self.glossary, query.normal, self.weights.translated)
        return Dense(scores, rows, dictionary)
