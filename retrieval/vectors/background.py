"""Hubness: a memory vector's mean cosine to its `TOP_K` nearest generic statements.

The background is a fixed set of generic first-person statements
(retrieval/data/background_texts.json, `ENGLISH` and `CHINESE`) embedded as queries, once per
process and model, on first use (`EmbeddingService.warm_up` at start-up: about 300 short
texts; they hold no personal data). The embeddings projection stores each memory's hubness
against both scripts with its vector (`EmbeddingService.hubness`); search subtracts the one of
the query's script (`is_cjk`) from the cosine. Why (CSLS): docs/retrieval.md.
"""

from __future__ import annotations

import json
import threading
from importlib import resources
from typing import Final, Protocol

import numpy as np

from domain.model.cjk import is_cjk
from domain.model.values import normalise_content
from projections.views.embeddings import Vectors, normalised

__all__ = ["CHINESE", "ENGLISH", "TOP_K", "background", "hubness", "is_cjk"]


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


class QueryModel(Protocol):
    """What the background is embedded with (an `Embedder`)."""

    model_id: str

    def query(self, text: str) -> Vectors:
        """The unit vector of a query."""
        ...


def background(model: QueryModel) -> tuple[Vectors, Vectors]:
    """The background's (Latin, CJK) query vectors for `model`, embedded on first use (as
    queries, outside the query cache: each stands for "a query about X"); raises what the
    model raises."""
    with _LOCK:
        computed = _COMPUTED.get(model.model_id)
        if computed is None:
            latin, cjk = (
                normalised(np.stack([model.query(normalise_content(t)) for t in texts]))
                for texts in (ENGLISH, CHINESE)
            )
            computed = _COMPUTED[model.model_id] = (latin, cjk)
        return computed


def hubness(memories: Vectors, scripts: tuple[Vectors, Vectors]) -> Vectors:
    """Each memory's mean top-`TOP_K` cosine to each script's background: shape (n, 2).

    Row by row without BLAS (einsum), so a memory's value does not depend on its batch: a
    rebuild writes the bytes of the live table.
    """
    columns = []
    for texts in scripts:
        similarity = np.einsum("ij,kj->ik", memories, texts)
        k = min(TOP_K, similarity.shape[1])
        top = np.partition(similarity, -k, axis=1)[:, -k:]
        columns.append(np.asarray(top.mean(axis=1), dtype=np.float32))
    return np.stack(columns, axis=1)
