"""The one ranking of a search: a weighted sum of evidence, a calibrated relevance, a threshold.

Every candidate (a memory among the query's dense top `pool`, or a lexical match) gets

    relevance = 1 / (1 + exp(-(A * dense + B)))              a memory with a vector
    dense     = cosine - HUBNESS * hubness + TRANSLATED * dictionary + LISTED * listed
    relevance = 1 / (1 + exp(-(A_lex * coverage + B_lex)))   a lexical match only

`cosine` is the query's with the memory (the embedder's), `hubness` the memory's mean cosine
to its ten nearest background statements (retrieval/vectors/background.py, CSLS), `dictionary` how
much of the query the memory holds in the other language (retrieval/glossary.py, CC-CEDICT,
0..1), `listed` 1 when the query only names categories ("my goals", "我的偏好") and the memory
is of one of them, `coverage` the share of the query's term weight the memory holds (0..1).

A lexical match (a key or phrase match, a category the query names, or enough shared terms:
`retrieval.query.judge`) makes a memory without a vector a candidate (not embedded yet, or the
embedder off); among equal relevance the lexical order decides (key, phrase, matched weight,
not due for review, newer, id). The constants are data (retrieval/data/fusion.json): HUBNESS,
A, B, A_lex, B_lex and the threshold fitted on the recall set's tuning split by
scripts/_recall_tune.py (Platt scaling of the top 5 items of each query), TRANSLATED and
LISTED kept from issue 7's tuning on the older labelled set. Items are ordered by relevance;
only those at or above `min_relevance` (default `THRESHOLD`) are returned. No rule removes a
dense candidate. Why these signals and not others: docs/retrieval.md (the ablation).
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from importlib import resources
from typing import Final
from uuid import UUID

from projections.tokens import query_terms
from retrieval.glossary import Evidence
from retrieval.query import (
    CATEGORY_WORDS,
    MAX_LIMIT,
    Judgement,
    Query,
    Scored,
    SearchRow,
    judge,
)

__all__ = ["DATA", "THRESHOLD", "WEIGHTS", "FusedRanker", "Weights"]

DATA: Final = resources.files("retrieval") / "data" / "fusion.json"


@dataclass(frozen=True, slots=True)
class Weights:
    """The formula's constants (retrieval/data/fusion.json)."""

    hubness: float
    translated: float
    listed: float
    platt_a: float
    platt_b: float
    lexical_a: float
    lexical_b: float
    threshold: float

    @classmethod
    def load(cls) -> Weights:
        """The fitted weights shipped with the package."""
        data = json.loads(DATA.read_text(encoding="utf-8"))
        return cls(**{f.name: float(data[f.name]) for f in fields(cls)})

    def relevance(self, dense: float | None, coverage: float) -> float:
        """The formula above: `dense` is cosine - HUBNESS * hubness, None without a vector."""
        if dense is None:
            return 1.0 / (1.0 + math.exp(-(self.lexical_a * coverage + self.lexical_b)))
        return 1.0 / (1.0 + math.exp(-(self.platt_a * dense + self.platt_b)))

    @property
    def version(self) -> str:
        """What the search cache keys on: every constant."""
        return "fused-1/" + "/".join(f"{getattr(self, f.name):g}" for f in fields(self))


WEIGHTS: Final = Weights.load()
THRESHOLD: Final = WEIGHTS.threshold
"""The default `min_relevance`: at most 1 % of the tuning split's answerable queries lose
their answer to it (docs/retrieval.md has the trade-off)."""


class FusedRanker:
    """Orders candidates by calibrated relevance; `dense` maps memory id -> cosine - HUBNESS x
    hubness (no entry: the memory has no current vector, or the search is lexical only),
    `dictionary` is the query's bilingual evidence (credit already weighted by TRANSLATED)."""

    def __init__(self, dense: Mapping[UUID, float], dictionary: Evidence | None = None) -> None:
        self.dense = dense
        self.dictionary = dictionary

    def rank(
        self,
        query: Query,
        rows: Sequence[SearchRow],
        *,
        now: datetime,
        min_relevance: float | None = None,
        limit: int = MAX_LIMIT,
    ) -> list[Scored]:
        """Candidates at or above `min_relevance` (default: the threshold), best first; all of
        them, but the dictionary is only consulted where it can lift a memory into the first
        `limit` (its credit is at most the query's `Evidence.most`, TRANSLATED or less: the
        others rank below `limit` rows anyway)."""
        w = WEIGHTS
        floor = w.threshold if min_relevance is None else min_relevance
        listing = names_only_categories(query)
        found: list[tuple[SearchRow, float | None, Judgement | None]] = []
        for row in rows:
            dense = self.dense.get(row.memory_id)
            j = judge(query, row, now) if dense is None or listing else None
            if dense is None and not (j is not None and j.matches):
                continue  # neither a dense candidate nor a lexical match
            if dense is not None and j is not None and j.category:
                dense += w.listed  # a listing query (`j` is judged for dense rows only then)
            found.append((row, dense, j))
        credited = self._credited(found, limit)
        ranked: list[tuple[tuple[object, ...], Scored]] = []
        for row, dense, j in found:
            dense = credited.get(row.memory_id, dense)
            relevance = round(w.relevance(dense, j.coverage if j is not None else 0.0), 6)
            if relevance < floor:
                continue
            tie = j.order if j is not None else (True, True, 0, 0, True, *_newer(row, now))
            ranked.append(((-relevance, *tie), Scored(row, relevance)))
        ranked.sort(key=lambda pair: pair[0])
        return [scored for _, scored in ranked]

    def _credited(
        self, found: Sequence[tuple[SearchRow, float | None, Judgement | None]], limit: int
    ) -> dict[UUID, float]:
        """Dense scores with the dictionary's credit, of the rows it can lift into the first
        `limit`: best dense first, until a row's score plus the most credit can give ranks
        below the `limit`-th credited score so far (nor any after it, then), and never one
        more than that most credit below the `limit`-th best dense score (the most is this
        query's: a memory matching each of its units by the unit's most specific term). A
        credit costs a memory's concepts (retrieval/glossary.py): most searches need a few,
        not all 50 candidates'."""
        evidence = self.dictionary
        if evidence is None or evidence.most <= 0:
            return {}
        dense = sorted(((d, r) for r, d, _ in found if d is not None), key=lambda p: -p[0])
        bar = dense[limit - 1][0] - evidence.most if len(dense) >= limit else -math.inf
        best: list[float] = []  # the `limit` best credited scores so far (a min-heap)
        credited: dict[UUID, float] = {}
        for score, row in dense:
            if score < bar or (
                len(best) >= limit and not _may_reach(score + evidence.most, best[0])
            ):
                break
            score += evidence.credit(row.memory_key, row.content)
            credited[row.memory_id] = score
            (heapq.heappush if len(best) < limit else heapq.heappushpop)(best, score)
        return credited


def _may_reach(score: float, kth: float) -> bool:
    """A dense score can rank at or above `kth`'s (relevance is rounded: ties are possible)."""
    return round(WEIGHTS.relevance(score, 0.0), 6) >= round(WEIGHTS.relevance(kth, 0.0), 6)


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


def _newer(row: SearchRow, now: datetime) -> tuple[bool, float, str]:
    """The end of the lexical order: not due for review first, then newer, then by id."""
    return row.is_due_for_review(now), -row.updated_at.timestamp(), str(row.memory_id)
