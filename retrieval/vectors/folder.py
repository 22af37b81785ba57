"""An embedder from a sentence-transformers model folder (optional: imported on first use).

`sentence-transformers` is not a dependency of memledger; install it to use this. Texts get
e5's `query: ` / `passage: ` prefixes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.vectors.service import EmbedderError, Vectors, normalised

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (a folder with its config and weights)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.model_id = f"sentence-transformers/{folder.name}"
        self._model: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._model is None:
            if not self.folder.is_dir():
                raise EmbedderError(f"no sentence-transformers model folder at {self.folder}")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as error:
                raise EmbedderError("sentence-transformers is not installed") from error
            try:
                self._model = SentenceTransformer(str(self.folder), device="cpu")
            except Exception as error:
                raise EmbedderError(f"the model in {self.folder} did not load: {error}") from error
        return self._model

    def _encode(self, texts: list[str]) -> Vectors:
        with self._lock:
            model = self._loaded()
            try:
                return normalised(model.encode(texts, normalize_embeddings=True))
            except Exception as error:
                raise EmbedderError(f"{self.model_id} failed: {type(error).__name__}") from error

    def passages(self, texts: Sequence[str]) -> Vectors:
        return self._encode([f"passage: {t}" for t in texts])

    def query(self, text: str) -> Vectors:
        return self._encode([f"query: {text}"])[0]
