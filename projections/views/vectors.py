"""What a vector is here: little-endian float32 rows of unit length, stored as their bytes.

Also the text a memory is embedded from (`passage_text`: its key's words, then its content)
and what the embeddings view (projections/views/embeddings.py) needs of an embedder
(`PassageEmbedder`; in production retrieval/vectors/service.py's `EmbeddingService`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol
from uuid import UUID

import numpy as np
import numpy.typing as npt

__all__ = [
    "DTYPE",
    "PassageEmbedder",
    "Vectors",
    "from_bytes",
    "normalised",
    "passage_text",
    "to_bytes",
]

DTYPE: Final = np.dtype("<f4")
"""Vectors are stored and compared as little-endian float32."""

Vectors = npt.NDArray[np.float32]


def passage_text(memory_key: str, content: str) -> str:
    """What a memory is embedded from: its key's words, then its content."""
    return f"{memory_key.replace('_', ' ')}: {content}"


def to_bytes(vector: Vectors) -> bytes:
    """The stored form of one vector."""
    return np.ascontiguousarray(vector, dtype=DTYPE).tobytes()


def from_bytes(data: bytes, dim: int) -> Vectors:
    """Vectors stored back to back (`to_bytes` of each) as a (n, dim) array."""
    return np.frombuffer(data, dtype=DTYPE).reshape(-1, dim)


def normalised(matrix: npt.ArrayLike) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    array = np.asarray(matrix, dtype=DTYPE)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


class PassageEmbedder(Protocol):
    """What the embeddings view needs of an embedder (failures contained: None, not raised)."""

    @property
    def model_id(self) -> str | None:
        """The vector space the vectors are of; None: embeddings are off."""
        ...

    @property
    def available(self) -> bool:
        """False while off or failing."""
        ...

    def passages(self, texts: Sequence[str]) -> Vectors | None:
        """One unit vector per text, or None when off or failing."""
        ...

    def hubness(self, vectors: Vectors) -> Vectors | None:
        """Each vector's (Latin, CJK) hubness, shape (n, 2), or None when off or failing."""
        ...

    def vectors_forgotten(self, schema: str, forgotten: Mapping[str, set[UUID]]) -> None:
        """These memories (user -> ids) were forgotten in `schema`: drop what was derived."""
        ...
