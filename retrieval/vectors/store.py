"""Vector reads: the caller's visible, retrievable memories scored against a query vector.

Exact scoring, which is enough at our scale (thousands of memories per user): the user's
current vectors are one matrix in memory (retrieval/vectors/matrix.py), loaded once, refreshed
from the changed rows when the user's memories or vectors changed (matrix_load.py) and
otherwise taken from the `MatrixCache`; a search costs one short statement (the key), one
matrix-vector product, a boolean mask for the visibility rules of the lexical fetch (user,
scopes, active and unexpired, category, a global memory hidden by a visible workspace one with
its key) and the rows of the few vector-only candidates. Only vectors of the current model and
of the memory's current revision take part: a stale vector (content changed, not re-embedded
yet) never speaks for new content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Final
from uuid import UUID

import numpy as np
import numpy.typing as npt
from psycopg.rows import dict_row
from psycopg.sql import SQL

from domain.model.values import Scope
from projections.reads import Reads
from projections.tracking import Tables
from projections.views.search_terms import READ_COLUMNS as SEARCH_COLUMNS
from projections.views.search_terms import open_search_rows
from retrieval.fetch import hashed_terms
from retrieval.query import Query
from retrieval.vectors.matrix import UserVectors
from retrieval.vectors.matrix_cache import MatrixCache
from retrieval.vectors.matrix_load import load_user_vectors, read_vector_key
from retrieval.vectors.service import Vectors

__all__ = ["Similar", "VectorReads", "visible_rows"]


@dataclass(frozen=True, slots=True)
class Similar:
    """The query's dense top `limit` and the lexical candidates that have a current vector."""

    similarity: dict[UUID, float]
    """Each one's cosine with the query."""
    hubness: dict[UUID, tuple[float, float]]
    """Each one's stored (Latin, CJK) hubness (retrieval/vectors/background.py)."""
    pending: dict[UUID, int]
    """The dense ones that are not lexical candidates, and their revision (rows: `rows_of`)."""


_NONE: Final = Similar({}, {}, {})


@lru_cache(maxsize=64)
def _rows_statement(schema: str) -> str:
    """Composed once per schema (composing costs more than the query; see matrix.py)."""
    columns = SQL(", ").join(SQL(c) for c in ("memory_id", *SEARCH_COLUMNS))
    return (
        SQL(
            "SELECT {} FROM {} WHERE partition = %s AND memory_id = ANY(%s) AND user_id = %s"
            " AND status = 'active'"
        )
        .format(columns, Tables(schema)["search_terms"])
        .as_string(None)
    )


def visible_rows(
    vectors: UserVectors, scopes: Sequence[Scope], now: datetime, category: str | None
) -> npt.NDArray[np.intp]:
    """The rows of `vectors` a search may return (`UserVectors.visible`), as indices."""
    return np.flatnonzero(vectors.visible(scopes, now, category))


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
            if known is not None and known.matrix.shape[-1] != dim:
                known = None  # another size: read every vector
        loaded = load_user_vectors(self.reads, user_id, model, dim, known)
        if cache is not None and loaded.key.may_store:
            return cache.put(schema, user_id, model, loaded)
        return loaded

    def similar(
        self,
        user_id: str,
        scopes: Sequence[Scope],
        query: Vectors,
        *,
        model: str,
        now: datetime,
        limit: int,
        category: str | None = None,
        include: Mapping[UUID, int] | None = None,
        vectors: UserVectors | None = None,
        shown: npt.NDArray[np.intp] | None = None,
    ) -> Similar:
        """The `limit` visible memories most similar to `query` (no floor: plain dense top-k).

        `include` maps the lexical candidates to their revision: each is given its similarity
        whatever it is (when it has a vector of that revision). `vectors`: the user's matrix,
        read by the caller already (`user_vectors`); `shown`: its visible rows
        (`visible_rows`), found by the caller while the query was embedded.
        """
        if not scopes:
            return _NONE
        if vectors is None or vectors.matrix.shape[-1] != query.shape[-1]:
            vectors, shown = self.user_vectors(user_id, model, query.shape[-1]), None
        if not vectors.ids:
            return _NONE
        if shown is None:
            shown = visible_rows(vectors, scopes, now, category)
        # einsum, not BLAS: a multi-threaded BLAS matvec is faster alone but waits for busy
        # cores on a loaded host (p95 25 ms against 1 ms single-threaded at 10,000 x 384).
        scores = np.einsum("ij,j->i", vectors.matrix, query)
        if len(shown) > limit > 0:  # only the rows scoring at least the limit-th can be in
            kth = np.partition(scores[shown], len(shown) - limit)[len(shown) - limit]
            shown = shown[scores[shown] >= kth]
        # Best first; equal scores: the smaller memory id first.
        best = shown[np.lexsort((vectors.id_order[shown], -scores[shown]))][:limit]
        lexical = include or {}
        pending = {vectors.ids[i]: int(vectors.revisions[i]) for i in best}
        pending = {m: r for m, r in pending.items() if m not in lexical}
        chosen = list(best)
        for memory_id, revision in lexical.items():
            i = vectors.index.get(memory_id)
            if i is not None and vectors.revisions[i] == revision:
                chosen.append(i)
        similarity = {vectors.ids[i]: float(scores[i]) for i in chosen}
        hub = vectors.hubness
        hubness = {vectors.ids[i]: (float(hub[i, 0]), float(hub[i, 1])) for i in chosen}
        return Similar(similarity, hubness, pending)

    def without_vector(self, model: str | None) -> int:
        """Live memories without a vector of `model` (all of them when `model` is None)."""
        statement = SQL(
            "SELECT count(*) FROM {} WHERE vector IS NULL OR model IS DISTINCT FROM %s"
        ).format(self.t["embeddings"])
        with self.reads.pool.connection() as conn:
            row = conn.execute(statement, (model,)).fetchone()
        return int(row[0]) if row else 0

    def rows_of(
        self,
        user_id: str,
        wanted: Mapping[UUID, int],
        query: Query,
        hashes: Mapping[int, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Search_terms rows of these memories, if still active at the revision scored, opened
        for ranking `query` (`open_search_rows`; `hashes`: the query's terms by their stored
        hashes, `hashed_terms`, when the caller has them). Unlike the lexical fetch's rows,
        their content is not normalised ahead: a dense candidate is judged lexically only by
        a listing query, and then once (`judge` normalises it)."""
        if not wanted:
            return []
        statement = _rows_statement(self.t.schema)
        partition = self.reads.partition(user_id)
        with (
            self.reads.pool.connection() as conn,
            conn.cursor(row_factory=dict_row, binary=True) as cur,  # binary: less to parse
        ):
            rows = cur.execute(statement, (partition, list(wanted), user_id)).fetchall()
        rows = [row for row in rows if wanted[row["memory_id"]] == row["revision"]]
        seal = self.t.seal
        if hashes is None:
            hashes = hashed_terms(seal, user_id, query)
        return open_search_rows(rows, seal, hashes)
