"""Hubness, the dense side of relevance: `Background(service).hubness(matrix, cjk_query=...)`.

A memory's dense evidence for a query is its cosine minus its *hubness*: the mean of its `TOP_K`
highest cosines to a fixed background of generic first-person statements
(retrieval/data/background_texts.json, `ENGLISH` and `CHINESE`) embedded as queries, taken in
the query's script (`domain.model.cjk.is_cjk`). About 0 for a memory no closer to the query
than to any other topic, positive for one that answers it. The background vectors are computed
once per process and model, on first use (`Background.warm_up` at start-up: about 300 short
texts); they hold no personal data. Why CSLS-style calibration: docs/retrieval.md.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Final

import numpy as np

from domain.model.values import normalise_content
from retrieval.vectors.service import EmbeddingService, Vectors, normalised

__all__ = ["CHINESE", "ENGLISH", "TOP_K", "Background"]


def _background_texts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    data = resources.files("retrieval") / "data" / "background_texts.json"
    texts = json.loads(data.read_text(encoding="utf-8"))
    return tuple(texts["english"]), tuple(texts["chinese"])


ENGLISH, CHINESE = _background_texts()
"""The background: generic first-person statements (retrieval/data/background_texts.json)."""

TOP_K: Final = 10
"""How many of the background's nearest texts a memory's hubness averages (CSLS's usual k)."""

_LOCK: Final = threading.Lock()
_COMPUTED: Final[dict[str, tuple[Vectors, Vectors]]] = {}
"""Per process: model id -> the background's (latin, cjk) query vectors (no personal data)."""


class Background:
    """The background texts' query vectors for one embedding service, computed once."""

    def __init__(self, service: EmbeddingService) -> None:
        self.service = service

    def vectors(self, cjk_query: bool) -> Vectors | None:
        """The background in the query's script, or None while the embedder fails."""
        model = self.service.model_id
        if model is None:
            return None
        with _LOCK:
            computed = _COMPUTED.get(model)
            if computed is None:
                latin = self._embed(ENGLISH)
                cjk = self._embed(CHINESE)
                if latin is None or cjk is None:
                    return None
                computed = _COMPUTED[model] = (latin, cjk)
        return computed[1] if cjk_query else computed[0]

    def warm_up(self) -> bool:
        """Compute the background now (at start-up) rather than in the first search."""
        return self.vectors(False) is not None

    def hubness(self, memories: Vectors, *, cjk_query: bool) -> Vectors | None:
        """Each memory's mean top-`TOP_K` cosine to the background (None: unavailable)."""
        background = self.vectors(cjk_query)
        if background is None:
            return None
        if len(memories) == 0:
            return np.zeros(0, dtype=np.float32)
        similarity = memories @ background.T
        k = min(TOP_K, similarity.shape[1])
        top = np.partition(similarity, -k, axis=1)[:, -k:]
        return np.asarray(top.mean(axis=1), dtype=np.float32)

    def _embed(self, texts: Sequence[str]) -> Vectors | None:
        embedder = self.service.embedder
        if embedder is None or not self.service.available:
            return None
        try:  # as queries (not through the query cache): each stands for "a query about X"
            rows = [embedder.query(normalise_content(text)) for text in texts]
        except Exception:  # a failing embedder: search is lexical until it answers again
            return None
        return normalised(np.stack(rows))
