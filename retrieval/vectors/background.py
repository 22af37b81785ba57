"""Hubness: a memory vector's mean cosine to its `TOP_K` nearest generic statements.

The background is a fixed set of generic first-person statements
(retrieval/data/background_texts.json, `ENGLISH` and `CHINESE`) embedded as queries, once per
process and model, on first use (`EmbeddingService.warm_up` at start-up: about 300 short
texts; they hold no personal data). The embeddings projection stores each memory's hubness
against both scripts with its vector (`EmbeddingService.hubness`); search subtracts the one of
the query's script (`is_cjk`) from the cosine. Why (CSLS): docs/retrieval.md.

Embedding the background takes seconds (about 5 with the bundled model on one thread), at every
start of `serve`, `memledger mcp` and `projections run`. With a cache folder
(`MEMLEDGER_CACHE_DIR`) the model's outputs are kept in a file named by the model id and the
texts, and taken back only when the model still gives the first text's vector bit for bit (one
embedding, checked at each start): a model changed under the same id is embedded afresh. The
file is written whole or not at all (renamed into place); a folder that cannot be read or
written only costs the embedding.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Final, Protocol

import numpy as np

from domain.model.cjk import is_cjk
from domain.model.values import normalise_content
from projections.views.vectors import Vectors, normalised

__all__ = ["CHINESE", "ENGLISH", "TOP_K", "background", "hubness", "is_cjk"]


def _background_texts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    data = resources.files("retrieval") / "data" / "background_texts.json"
    texts = json.loads(data.read_text(encoding="utf-8"))
    return tuple(texts["english"]), tuple(texts["chinese"])


ENGLISH, CHINESE = _background_texts()
"""The background: generic first-person statements (retrieval/data/background_texts.json)."""

TOP_K: Final = 10
"""How many of the background's nearest texts a memory's hubness averages (CSLS's usual k)."""

_log = logging.getLogger(__name__)
_LOCK: Final = threading.Lock()
_COMPUTED: Final[dict[str, tuple[Vectors, Vectors]]] = {}
"""Per process: model id -> the background's (latin, cjk) query vectors (no personal data)."""


class QueryModel(Protocol):
    """What the background is embedded with (an `Embedder`)."""

    model_id: str

    def query(self, text: str) -> Vectors:
        """The unit vector of a query."""
        ...


def background(model: QueryModel, cache: Path | None = None) -> tuple[Vectors, Vectors]:
    """The background's (Latin, CJK) query vectors for `model`, embedded on first use (as
    queries, outside the query cache: each stands for "a query about X") or taken from the
    `cache` folder; raises what the model raises."""
    with _LOCK:
        computed = _COMPUTED.get(model.model_id)
        if computed is None:
            texts = [normalise_content(t) for t in (*ENGLISH, *CHINESE)]
            path = _file(model, texts, cache)
            raw = _cached(model, texts, path)
            if raw is None:
                raw = np.stack([model.query(t) for t in texts])
                _keep(raw, path)
            latin, cjk = normalised(raw[: len(ENGLISH)]), normalised(raw[len(ENGLISH) :])
            computed = _COMPUTED[model.model_id] = (latin, cjk)
        return computed


def _file(model: QueryModel, texts: list[str], cache: Path | None) -> Path | None:
    if cache is None:
        return None
    named = json.dumps([model.model_id, texts], ensure_ascii=False).encode()
    return cache / f"background-{hashlib.sha256(named).hexdigest()[:32]}.npy"


def _cached(model: QueryModel, texts: list[str], path: Path | None) -> Vectors | None:
    """The model's kept outputs for `texts` (at `path`), if its first text's vector is still
    the kept one."""
    if path is None or not path.is_file():
        return None
    try:
        raw: Vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        _log.warning("background cache %s unreadable (%s): embedding it", path, error)
        return None
    if raw.ndim != 2 or raw.shape[0] != len(texts) or raw.dtype != np.float32:
        return None  # not a file this wrote
    probe = np.asarray(model.query(texts[0]))
    if probe.shape != raw.shape[1:] or not np.array_equal(probe, raw[0]):
        _log.info("background cache %s is of another model build: embedding it", path)
        return None
    return raw


def _keep(raw: Vectors, path: Path | None) -> None:
    """Write `raw` to `path` whole (a temporary file renamed into place), or not at all."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                np.save(out, np.asarray(raw, dtype=np.float32), allow_pickle=False)
            os.chmod(temporary, 0o644)  # public data: other users' processes may read it
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as error:
        _log.warning("background cache %s not written (%s)", path, error)


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
