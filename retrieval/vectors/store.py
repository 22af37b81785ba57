"""Vector reads: the caller's visible, retrievable memories scored against a query vector.

Exact scoring, which is enough at our scale (thousands of memories per user): the user's
current vectors are one matrix in memory (retrieval/vectors/matrix.py), loaded in one
statement when the user's memories or vectors changed and otherwise taken from the
`MatrixCache`; a search costs one short statement (the key), one matrix-vector product, a
boolean mask for the visibility rules of the lexical fetch (user, scopes, active and unexpired,
category, a global memory hidden by a visible workspace one with its key) and the rows of the
few vector-only candidates. Only vectors of the current model and of the memory's current
revision take part: a stale vector (content changed, not re-embedded yet) never speaks for new
content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
from psycopg.rows import dict_row
from psycopg.sql import SQL

from domain.model.values import Scope
from projections.reads import Reads
from projections.tracking import Tables
from projections.views.search_terms import COLUMNS as SEARCH_COLUMNS
from projections.views.search_terms import open_search_rows
from retrieval.vectors.matrix import UserVectors, load_user_vectors, read_vector_key
from retrieval.vectors.matrix_cache import MatrixCache
from retrieval.vectors.service import Vectors

__all__ = ["Similar", "Similarities", "VectorReads"]


@dataclass(frozen=True, slots=True)
class Similarities:
    """The query's cosine with every memory the search may return that has a current vector.

    `ids[rows[i]]` has similarity `scores[i]`; `ids` are all of the user's memories with a
    current vector (shared with the cached matrix: do not change), `rows` the visible ones.
    """

    ids: tuple[UUID, ...]
    rows: npt.NDArray[np.intp]
    scores: npt.NDArray[np.float32]

    def __len__(self) -> int:
        return len(self.rows)

    def as_dict(self) -> dict[UUID, float]:
        """Every visible memory's similarity by id (builds a dict: for small users or tests)."""
        return {self.ids[r]: float(s) for r, s in zip(self.rows, self.scores, strict=True)}


_NONE = Similarities((), np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32))


@dataclass(frozen=True, slots=True)
class Similar:
    """The memories at or above the threshold, best first, with their cosine similarity."""

    similarity: dict[UUID, float]
    """The `limit` most similar at or above the threshold, and the lexical candidates."""
    rows: list[dict[str, Any]]
    """Search_terms rows of the vector-only ones (as `retrieval.fetch.fetch_rows` returns them)."""
    scored: int
    """How many vectors were compared."""
    all: Similarities = _NONE
    """Every visible memory's similarity (for a ranker that wants more than the best)."""
    vectors: dict[UUID, Vectors] = field(default_factory=dict)
    """The vector of each memory in `similarity` (the ranker calibrates with them)."""
    pending: dict[UUID, int] = field(default_factory=dict)
    """`fetch=False`: the vector-only ones and their revision, rows not read yet (`rows_of`)."""


@lru_cache(maxsize=64)
def _rows_statement(schema: str) -> str:
    """Composed once per schema (composing costs more than the query; see matrix.py)."""
    columns = SQL(", ").join(SQL(c) for c in ("memory_id", *SEARCH_COLUMNS))
    return (
        SQL("SELECT {} FROM {} WHERE memory_id = ANY(%s) AND user_id = %s AND status = 'active'")
        .format(columns, Tables(schema)["search_terms"])
        .as_string(None)
    )


class VectorReads:
    """Vector queries over the embeddings projection joined with search_terms."""

    def __init__(self, reads: Reads, cache: MatrixCache | None = None) -> None:
        self.reads = reads
        self.t = reads.t
        self.cache = cache

    def user_vectors(self, user_id: str, model: str, dim: int) -> UserVectors:
        """The user's matrix: from the cache while their memories and vectors are unchanged."""
        cache, schema = self.cache, self.t.schema
        known = None
        if cache is not None and cache.max_bytes > 0:
            key = read_vector_key(self.reads, user_id)
            known = cache.peek(schema, user_id, model)
            if key.may_serve:
                cached = cache.get(schema, user_id, model, key)
                if cached is not None:
                    return cached
            if known is not None and (known.key.table, known.matrix.shape[-1]) != (key.table, dim):
                known = None  # another embeddings table (a rebuild) or size: read every vector
        loaded = load_user_vectors(self.reads, user_id, model, dim, known)
        if cache is not None and loaded.key.may_store:
            cache.put(schema, user_id, model, loaded)
        return loaded

    def similar(
        self,
        user_id: str,
        scopes: Sequence[Scope],
        query: Vectors,
        *,
        model: str,
        now: datetime,
        min_similarity: float,
        limit: int,
        category: str | None = None,
        include: Mapping[UUID, int] | None = None,
        fetch: bool = True,
    ) -> Similar:
        """The `limit` most similar visible memories with similarity >= `min_similarity`.

        `include` maps the lexical candidates to their revision: each is given its similarity
        whatever it is (when it has a vector of that revision); their rows are not fetched.
        """
        if not scopes:
            return Similar({}, [], 0)
        vectors = self.user_vectors(user_id, model, query.shape[-1])
        if not vectors.ids:
            return Similar({}, [], 0)
        # einsum, not BLAS: a multi-threaded BLAS matvec is faster alone but waits for busy
        # cores on a loaded host (p95 25 ms against 1 ms single-threaded at 10,000 x 384).
        scores = np.einsum("ij,j->i", vectors.matrix, query)
        visible = vectors.visible(scopes, now, category)
        above = np.flatnonzero(visible & (scores >= min_similarity))
        # Best first; equal scores: the smaller memory id first.
        best = above[np.lexsort((vectors.id_order[above], -scores[above]))][:limit]
        similarity = {vectors.ids[i]: float(scores[i]) for i in best}
        lexical = include or {}
        new = {m: int(vectors.revisions[i]) for m, i in zip(similarity, best, strict=True)}
        new = {m: r for m, r in new.items() if m not in lexical}
        for memory_id, revision in lexical.items():
            i = vectors.index.get(memory_id)
            if i is not None and vectors.revisions[i] == revision:
                similarity[memory_id] = float(scores[i])
        rows = self.rows_of(user_id, new) if fetch else []
        if fetch:
            for gone in new.keys() - {row["memory_id"] for row in rows}:
                del similarity[gone]  # changed or forgotten since the matrix was read
        shown = np.flatnonzero(visible)
        every = Similarities(vectors.ids, shown, scores[shown])
        chosen = {m: vectors.matrix[vectors.index[m]] for m in similarity}
        return Similar(similarity, rows, len(shown), every, chosen, {} if fetch else new)

    def without_vector(self, model: str | None) -> int:
        """Live memories without a vector of `model` (all of them when `model` is None)."""
        statement = SQL(
            "SELECT count(*) FROM {} WHERE vector IS NULL OR model IS DISTINCT FROM %s"
        ).format(self.t["embeddings"])
        with self.reads.pool.connection() as conn:
            row = conn.execute(statement, (model,)).fetchone()
        return int(row[0]) if row else 0

    def rows_of(self, user_id: str, wanted: Mapping[UUID, int]) -> list[dict[str, Any]]:
        """Search_terms rows of these memories, if still active at the revision scored."""
        if not wanted:
            return []
        statement = _rows_statement(self.t.schema)
        with self.reads.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(statement, (list(wanted), user_id)).fetchall()
        rows = [row for row in rows if wanted[row["memory_id"]] == row["revision"]]
        return open_search_rows(rows, self.t.seal)
