"""The one ranking of a search: a weighted sum of evidence, a calibrated relevance, a threshold.

Every candidate (a memory among the query's dense top `pool`, or a lexical match) gets

    relevance = 1 / (1 + exp(-(A * (cosine - HUBNESS * hubness) + B)))   (it has a vector)
    relevance = 1 / (1 + exp(-(A_lex * coverage + B_lex)))                (a lexical match only)

`cosine` is the query's with the memory (the embedder's), `hubness` the memory's mean cosine
to its ten nearest background statements (retrieval/calibration.py, CSLS), `coverage` the share
of the query's term weight the memory holds (0..1). A lexical match is a key or phrase match, a
category the query names, or enough shared terms (`retrieval.query.judge`): it makes a memory
without a vector (not embedded yet, or the embedder off) a candidate; among equal relevance the
lexical order decides (key, phrase, matched weight, not due for review, newer, id). HUBNESS, A,
B, A_lex, B_lex and the threshold are data (retrieval/data/fusion.json), fitted on the recall
set's tuning split by scripts/_recall_tune.py (Platt scaling of the items each query returns).
Items are ordered by relevance; only those at or above `min_relevance` (default `THRESHOLD`)
are returned. No rule removes a dense candidate. Why these signals and not others (lexical
coverage, exact matches, the dictionary, categories: the ablation): docs/retrieval.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from importlib import resources
from typing import Final
from uuid import UUID

from retrieval.query import Query, Scored, SearchRow, judge

__all__ = ["DATA", "THRESHOLD", "WEIGHTS", "FusedRanker", "Weights"]

DATA: Final = resources.files("retrieval") / "data" / "fusion.json"


@dataclass(frozen=True, slots=True)
class Weights:
    """The formula's constants (retrieval/data/fusion.json)."""

    hubness: float
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
    hubness (no entry: the memory has no current vector, or the search is lexical only)."""

    def __init__(self, dense: Mapping[UUID, float], weights: Weights = WEIGHTS) -> None:
        self.dense = dense
        self.weights = weights
        self.version = weights.version

    def rank(
        self,
        query: Query,
        rows: Sequence[SearchRow],
        *,
        now: datetime,
        min_relevance: float | None = None,
    ) -> list[Scored]:
        """Candidates at or above `min_relevance` (default: the threshold), best first."""
        w = self.weights
        floor = w.threshold if min_relevance is None else min_relevance
        ranked: list[tuple[tuple[object, ...], Scored]] = []
        for row in rows:
            j = judge(query, row, now)
            dense = self.dense.get(row.memory_id)
            if dense is None and not j.matches:
                continue  # neither a dense candidate nor a lexical match
            relevance = round(w.relevance(dense, j.coverage), 6)
            if relevance < floor:
                continue
            order = (-relevance, *j.order)  # ties: the lexical order (review, newer, id)
            ranked.append((order, Scored(row, relevance)))
        ranked.sort(key=lambda pair: pair[0])
        return [scored for _, scored in ranked]
