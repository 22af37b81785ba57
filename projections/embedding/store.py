"""Vector reads: the caller's visible, retrievable memories scored against a query vector.

Exact scoring, which is enough at our scale (thousands of memories per user): one statement
returns the ids and the vectors of every memory the search may return (the same filter as the
lexical fetch: user, scopes, active and unexpired, category, a global memory hidden by a
visible workspace one with its key), the vectors as one concatenated bytea; one matrix product
scores them all. Only vectors of the current model and of the memory's current revision take
part: a stale vector (content changed, not re-embedded yet) never speaks for new content.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg.rows import dict_row
from psycopg.sql import SQL, Composed

from domain.model.values import Scope
from projections.embedding.embedder import Vectors, from_bytes
from projections.queries import Reads
from projections.views.search_terms import COLUMNS as SEARCH_COLUMNS
from projections.views.search_terms import SEP

__all__ = ["Similar", "VectorReads"]


def _scopes(alias: str, count: int) -> Composed:
    return SQL(" OR ").join(
        SQL(
            f"({alias}scope_type = %(s{i})s"
            f" AND {alias}workspace_type IS NOT DISTINCT FROM %(w{i})s)"
        )
        for i in range(count)
    )


@dataclass(frozen=True, slots=True)
class Similar:
    """The memories at or above the threshold, best first, with their cosine similarity."""

    similarity: dict[UUID, float]
    rows: list[dict[str, Any]]
    """Their search_terms rows (as `Reads.search_candidates` returns them)."""
    scored: int
    """How many vectors were compared."""
    vectors: dict[UUID, Vectors] = field(default_factory=dict)
    """The vector of each memory in `similarity` (the ranker calibrates with them)."""


class VectorReads:
    """Vector queries over the embeddings projection joined with search_terms."""

    def __init__(self, reads: Reads) -> None:
        self.reads = reads
        self.t = reads.t

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
        include: Collection[UUID] = (),
    ) -> Similar:
        """The `limit` most similar visible memories with similarity >= `min_similarity`.

        The similarity of the memories in `include` (the lexical candidates) is given whatever
        it is (when they have a current vector); their rows are not fetched again.
        """
        if not scopes:
            return Similar({}, [], 0)
        params: dict[str, Any] = {"user": user_id, "now": now, "model": model}
        params["category"] = category
        for i, scope in enumerate(scopes):
            params[f"s{i}"] = scope.scope_type
            params[f"w{i}"] = scope.workspace_type
        statement = SQL(
            "SELECT array_agg(e.memory_id ORDER BY e.memory_id) AS ids,"
            " string_agg(e.vector, ''::bytea ORDER BY e.memory_id) AS vectors"
            " FROM {embeddings} e JOIN {terms} s ON s.memory_id = e.memory_id"
            " WHERE e.user_id = %(user)s AND e.model = %(model)s AND e.revision = s.revision"
            " AND s.user_id = %(user)s AND s.status = 'active'"
            " AND (s.expires_at IS NULL OR s.expires_at > %(now)s) AND ({scopes})"
            " AND (%(category)s::text IS NULL OR s.category = %(category)s)"
            " AND NOT (s.scope_type = 'global' AND EXISTS (SELECT 1 FROM {terms} w"
            "  WHERE w.user_id = s.user_id AND w.memory_key = s.memory_key"
            "  AND w.scope_type = 'workspace' AND w.status = 'active'"
            "  AND (w.expires_at IS NULL OR w.expires_at > %(now)s) AND ({w_scopes})))"
        ).format(
            embeddings=self.t["embeddings"],
            terms=self.t["search_terms"],
            scopes=_scopes("s.", len(scopes)),
            w_scopes=_scopes("w.", len(scopes)),
        )
        with self.reads.pool.connection() as conn, conn.cursor(binary=True) as cur:
            row = cur.execute(statement, params, prepare=False).fetchone()
        if row is None or row[0] is None:
            return Similar({}, [], 0)
        ids: list[UUID] = row[0]
        matrix = from_bytes(row[1], query.shape[-1])
        scores = matrix @ query
        above = np.flatnonzero(scores >= min_similarity)
        # Best first; equal scores by id (ids are sorted, and the sort is stable).
        best = above[np.argsort(-scores[above], kind="stable")][:limit]
        similarity = {ids[i]: float(scores[i]) for i in best}
        new = [memory_id for memory_id in similarity if memory_id not in include]
        if include:
            wanted = set(include)
            for i, memory_id in enumerate(ids):
                if memory_id in wanted:
                    similarity[memory_id] = float(scores[i])
        position = {memory_id: i for i, memory_id in enumerate(ids)}
        vectors = {memory_id: matrix[position[memory_id]] for memory_id in similarity}
        return Similar(similarity, self._rows(new), len(ids), vectors)

    def without_vector(self, model: str | None) -> int:
        """Live memories without a vector of `model` (all of them when `model` is None)."""
        statement = SQL(
            "SELECT count(*) FROM {} WHERE vector IS NULL OR model IS DISTINCT FROM %s"
        ).format(self.t["embeddings"])
        with self.reads.pool.connection() as conn:
            row = conn.execute(statement, (model,)).fetchone()
        return int(row[0]) if row else 0

    def _rows(self, memory_ids: list[UUID]) -> list[dict[str, Any]]:
        if not memory_ids:
            return []
        columns = SQL(", ").join(SQL(c) for c in ("memory_id", *SEARCH_COLUMNS))
        statement = SQL("SELECT {} FROM {} WHERE memory_id = ANY(%s)").format(
            columns, self.t["search_terms"]
        )
        with self.reads.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(statement, (memory_ids,)).fetchall()
        for row in rows:
            cut = len(row["user_id"]) + len(SEP)
            row["terms"] = [term[cut:] for term in row["terms"]]
        return rows
