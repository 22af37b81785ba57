"""Hybrid retrieval: lexical and vector evidence fused, every rule of section 10 kept.

`HybridSource` is what `MemorySearch` consults when embeddings are on: it embeds the query
(cached), scores the caller's visible memories exactly against their matrix (kept in memory
per user until their memories or vectors change: projections/embedding/store.py) and hands
back the memories at or above the minimum similarity, to be ranked together with the lexical
candidates by a `HybridRanker`, and every visible memory's similarity (`HybridFound.all`).
The scope, status, shadowing, category and budget rules stay in `search()`, which sees only
visible, retrievable candidates either way.

The fusion is deterministic and ordered in tiers:

1. an exact `memory_key` match, then memories containing the query as a phrase, in the lexical
   ranker's own order (what lexical search is sure of stays first);
2. every other candidate, lexical match or not, by `similarity + LEXICAL_WEIGHT * coverage`:
   cosine similarity of query and memory, plus the share of the query's term weight the memory
   holds (the lexical ranker's coverage, 0..1). A lexical match without a usable vector counts
   as at the threshold. Ties: not due for review first (section 9.4 demotion), newer, then id.

A memory that no query term matches must reach `MIN_SIMILARITY` to be returned at all: that
threshold keeps "no match returns nothing" true for unrelated queries. Lexical matches are never
dropped, so the hybrid returns at least what lexical search returns.

The thresholds are calibrated on unrelated pairs, not fitted to the labelled answers (see
THRESHOLDS); the lexical weight is the gap between related and unrelated cosines, rounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any, Final
from uuid import UUID

from domain.model.text import normalise_content, normalise_key
from domain.model.values import Scope
from projections.embedding.service import EmbeddingService
from projections.embedding.store import Similarities, VectorReads
from projections.queries import Reads
from projections.search import Candidate, Ranker, Scored, document_terms, query_terms

__all__ = [
    "LEXICAL_WEIGHT",
    "MIN_SIMILARITY",
    "VECTOR_POOL",
    "HybridFound",
    "HybridRanker",
    "HybridSource",
]

THRESHOLDS: Final[Mapping[tuple[bool, bool], float]] = {
    # (query written in CJK, memory written in CJK): cosine (multilingual-e5-small, q4) a
    # memory must reach when no query term matches it. Each is the 99.9th percentile of the
    # similarity between the labelled queries and the memories of *other* users (pairs that
    # are unrelated by construction, labels not used), per language pair: e5's cosine scale
    # differs by pair (Chinese-Chinese pairs run about 0.05 higher than English-Chinese ones).
    # The 99th percentile (0.85, 0.83, 0.82, 0.88) lifts recall@5 over all queries from 0.835
    # to 0.907 but lets one unrelated query through: "no match returns nothing" comes first.
    (False, False): 0.88,
    (False, True): 0.865,
    (True, False): 0.84,
    (True, True): 0.905,
}
MIN_SIMILARITY: Final = min(THRESHOLDS.values())
"""The lowest threshold: the vector fetch's floor (a ranker may be given a higher one)."""
LEXICAL_WEIGHT: Final = 0.05
"""What full lexical coverage adds to the cosine, in cosine units."""
VECTOR_POOL: Final = 50
"""At most this many vector-only candidates (the most similar) are ranked."""


class HybridRanker:
    """Lexical ranking with vector similarity fused in (see the module docstring)."""

    def __init__(
        self,
        lexical: Ranker,
        similarity: Mapping[UUID, float],
        *,
        min_similarity: float = MIN_SIMILARITY,
        lexical_weight: float = LEXICAL_WEIGHT,
        model: str = "",
    ) -> None:
        self.lexical = lexical
        self.similarity = similarity
        self.min_similarity = min_similarity
        self.lexical_weight = lexical_weight
        self.version = hybrid_version(lexical, model, min_similarity, lexical_weight)

    def _threshold(self, cjk_query: bool, content: str) -> float:
        pair = THRESHOLDS[(cjk_query, bool(_CJK.search(content)))]
        return max(pair, self.min_similarity)

    def rank(self, query: str, candidates: Sequence[Candidate], *, now: datetime) -> list[Scored]:
        """Matches only (lexical ones, and others at or above the threshold), best first."""
        lexical = self.lexical.rank(query, candidates, now=now)
        matched = {s.candidate.memory_id: position for position, s in enumerate(lexical)}
        terms = query_terms(query)
        total = sum(terms.values())
        phrase = normalise_content(query) if terms else ""
        query_key = normalise_key(query)
        cjk_query = bool(_CJK.search(query))
        ranked: list[tuple[tuple[Any, ...], Scored]] = []
        for c in candidates:
            position = matched.get(c.memory_id)
            similarity = self.similarity.get(c.memory_id)
            if position is None and (
                similarity is None or similarity < self._threshold(cjk_query, c.content)
            ):
                continue
            tier = 2
            if position is not None:
                if bool(query_key) and query_key == c.memory_key:
                    tier = 0
                elif phrase and _holds_phrase(lexical[position].score):
                    tier = 1
            found = (
                c.terms
                if c.terms is not None
                else document_terms(f"{c.memory_key.replace('_', ' ')} {c.content}")
            )
            coverage = Fraction(sum(w for t, w in terms.items() if t in found), total or 1)
            fused = (similarity if similarity is not None else self.min_similarity) + (
                self.lexical_weight * float(coverage)
            )
            if tier < 2:
                order: tuple[Any, ...] = (tier, position)
            else:
                order = (
                    tier,
                    -round(fused, 6),  # deterministic across platforms' float noise
                    c.is_due_for_review(now),
                    -c.updated_at.timestamp(),
                    str(c.memory_id),
                )
            ranked.append((order, Scored(c, fused + 2 - tier)))
        ranked.sort(key=lambda pair: pair[0])
        return [scored for _, scored in ranked]


_CJK: Final = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _holds_phrase(lexical_score: float) -> bool:
    # LexicalRanker: score = 8 * key match + 4 * phrase + 2 * coverage + category (<= 3).
    return lexical_score % 8 >= 4


def hybrid_version(
    lexical: Ranker, model: str, min_similarity: float, lexical_weight: float
) -> str:
    """The retrieval version of a hybrid search (the search cache keys on it)."""
    return f"hybrid-1/{lexical.version}/{model}/{min_similarity:g}/{lexical_weight:g}"


@dataclass(frozen=True, slots=True)
class HybridFound:
    """Vector candidates for one search, and the ranker that fuses them with lexical ones."""

    rows: list[dict[str, Any]]
    """Search_terms rows of the vector-only candidates (the lexical ones are not repeated)."""
    ranker: HybridRanker
    all: Similarities
    """The query's similarity with every visible memory that has a current vector."""


class HybridSource:
    """Vector evidence for `MemorySearch`; None from `find` means: rank lexically."""

    def __init__(
        self,
        service: EmbeddingService,
        *,
        min_similarity: float = MIN_SIMILARITY,
        lexical_weight: float = LEXICAL_WEIGHT,
        pool: int = VECTOR_POOL,
    ) -> None:
        self.service = service
        self.min_similarity = min_similarity
        self.lexical_weight = lexical_weight
        self.pool = pool

    def version(self, lexical: Ranker) -> str:
        """The retrieval version while embeddings are available (else the lexical one)."""
        model = self.service.model_id
        if model is None or not self.service.available:
            return lexical.version
        return hybrid_version(lexical, model, self.min_similarity, self.lexical_weight)

    def find(
        self,
        reads: Reads,
        lexical: Ranker,
        user_id: str,
        scopes: Sequence[Scope],
        query: str,
        *,
        now: datetime,
        category: str | None,
        lexical_revisions: Mapping[UUID, int] | None = None,
    ) -> HybridFound | None:
        """Vector candidates and the fusing ranker, or None when embeddings are unavailable.

        `lexical_revisions`: the lexical candidates and their revisions (they get their
        similarity whatever it is, if they have a vector of that revision).
        """
        model = self.service.model_id
        vector = self.service.query(query) if model is not None else None
        if vector is None or model is None:
            return None
        similar = VectorReads(reads, self.service.matrices).similar(
            user_id,
            scopes,
            vector,
            model=model,
            now=now,
            min_similarity=self.min_similarity,
            limit=self.pool,
            category=category,
            include=lexical_revisions,
        )
        ranker = HybridRanker(
            lexical,
            similar.similarity,
            min_similarity=self.min_similarity,
            lexical_weight=self.lexical_weight,
            model=model,
        )
        return HybridFound(similar.rows, ranker, similar.all)
