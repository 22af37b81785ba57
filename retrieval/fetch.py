"""The narrow candidate fetch of `search_core_memories`: a few search_terms rows, never all.

`fetch_rows` returns the user's live, visible, unshadowed lexical matches among which the
lexical order (`retrieval.query.judge`) finds its first `limit`, so that ranking them gives
exactly the lexical answer of ranking all the user's memories. It walks that order in SQL and
stops as soon as the first `limit` are certain, usually after one statement:

1. Top: the rows holding the query as key, or every query term (GIN `@>`: an intersection of
   posting lists). Only these can contain the query as a phrase, which SQL cannot test; it
   sorts them in two streams by the rest of the ranker's order: the key rows and the rows
   holding every term of the phrase's words (`document_terms`, stop words and all bigrams
   included: necessary for the phrase), and the others (which cannot hold it). Each stream's
   last row bounds the ranker's key of every row not fetched from it; a fetched match whose key
   is below every open stream's bound is certain. When fewer than `limit` are, the stream with
   the lowest bound is fetched again with four times the rows, until it is exhausted.
2. Lower stages, once the top is exhausted and still short: lower matched term weight, level
   by level (weight at least m, via GIN `@>` on the minimal term subsets reaching m), then any
   shared term (`&&`), then rows only of a category the query names, newest first (not yet due
   for review, then due). Here SQL's order is the ranker's, so each stage asks only for the
   matches still missing.

Each returned row says whether a live visible workspace row with its key hides it (checked on
returned rows only); hidden rows are dropped here but still count where a limit was reached.
The fetch reads the query as the ranker does (`Query`, `document_terms` of its phrase).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import combinations
from typing import Any, Final

from psycopg import Cursor
from psycopg.rows import dict_row

from domain.model.values import Scope, normalise_content
from projections.reads import Reads
from projections.sealed import RowSeal
from projections.tokens import document_terms
from projections.tracking import Tables
from projections.views.search_terms import open_search_rows, term_hashes
from retrieval.fetch_sql import KEY, PHRASE, REST, Stage, Statements, statements
from retrieval.query import MAX_LIMIT, MIN_MATCHED, Query, SearchRow, judge

__all__ = ["SLACK", "fetch_rows", "levels", "opened_rows"]

SLACK: Final = 2
"""Rows fetched beyond `limit` per top stream at first, so a false stand-in costs no refetch."""
MAX_TERMS_FOR_LEVELS: Final = 6
MAX_BRANCHES: Final = 6
MAX_LEVELS: Final = 2
PREPARE: Final = True
"""Prepared: parsing is saved; PostgreSQL still plans GIN lookups with the actual terms (custom
plans cost less than a generic one there), and the user check is kept off the btree indexes."""

Run = Callable[..., list[dict[str, Any]]]


def levels(weights: Sequence[int]) -> list[tuple[int, list[tuple[int, ...]]]]:
    """Matched-weight thresholds below the total, each with the minimal term subsets reaching it.

    Only thresholds of at least `MIN_MATCHED` whose subsets are few and not all single terms
    (that is the `&&` level); none for long queries.
    """
    count = len(weights)
    if count > MAX_TERMS_FOR_LEVELS:
        return []
    subsets = [s for size in range(1, count + 1) for s in combinations(range(count), size)]
    weight = {s: sum(weights[i] for i in s) for s in subsets}
    found: list[tuple[int, list[tuple[int, ...]]]] = []
    for m in sorted({w for w in weight.values() if MIN_MATCHED <= w < sum(weights)}, reverse=True):
        minimal = [
            s
            for s in subsets
            if weight[s] >= m and all(weight.get(tuple(i for i in s if i != j), 0) < m for j in s)
        ]
        if len(minimal) > MAX_BRANCHES or all(len(s) == 1 for s in minimal):
            break
        found.append((m, minimal))
        if len(found) == MAX_LEVELS:
            break
    return found


def _phrase_terms(q: Query) -> frozenset[str]:
    """Terms every row containing the phrase holds (single CJK characters of a bigram implied)."""
    terms = document_terms(q.phrase) if q.phrase else frozenset()
    implied = {char for term in terms if len(term) == 2 for char in term}
    return frozenset(t for t in terms if not (len(t) == 1 and t in implied))


def fetch_rows(
    reads: Reads,
    user_id: str,
    scopes: Sequence[Scope],
    query: Query,
    *,
    now: datetime,
    category: str | None = None,
    limit: int = MAX_LIMIT,
) -> list[dict[str, Any]]:
    """The few search_terms rows `search` needs to rank `query` exactly (see the module
    docstring): the user's active, unexpired, visible, unshadowed memories that can rank within
    the first `limit`, opened, with their `terms` and `key_terms`.

    The query's terms and key are looked up by their keyed hashes; only the returned rows are
    opened (their terms: the query terms among their stored hashes). One statement when the top
    stage settles the answer (most queries), one more per lower stage needed. (Lower stages
    chained in one statement behind gates planned slower than they saved.)
    """
    if not scopes:
        return []
    with reads.pool.connection() as conn, conn.cursor(row_factory=dict_row, binary=True) as cur:
        return _fetch(
            cur,
            _table(reads.t.schema),
            reads.t.seal,
            (user_id, reads.partition(user_id)),
            scopes,
            query,
            now,
            category,
            limit,
        )


@lru_cache(maxsize=64)
def _table(schema: str) -> str:
    """The rendered search_terms name of a schema (composing it cost as much as a stage's
    parameters)."""
    return Tables(schema)["search_terms"].as_string(None)


def opened_rows(
    rows: list[dict[str, Any]], seal: RowSeal, query_hashes: Mapping[int, str], query: Query
) -> list[dict[str, Any]]:
    """search_terms rows opened for ranking `query` (`open_search_rows`; `query_hashes`: of
    `hashed_terms`); with a phrase, each row's content normalised once, since every judgement
    of a row tests the phrase."""
    found = open_search_rows(rows, seal, query_hashes)
    if query.phrase:
        for row in found:
            row["normal"] = normalise_content(row["content"])
    return found


def hashed_terms(seal: RowSeal, user_id: str, query: Query) -> dict[int, str]:
    """Each of the query's terms by its stored hash (`term_hashes`) for this user."""
    terms = list(query.terms)
    return dict(zip(term_hashes(seal, user_id)(terms), terms, strict=True))


def _fetch(
    cur: Cursor[dict[str, Any]],
    table: str,
    seal: RowSeal,
    user: tuple[str, int],
    scopes: Sequence[Scope],
    q: Query,
    now: datetime,
    category: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    user_id, partition = user
    wanted = max(1, min(limit, MAX_LIMIT))
    hashed = term_hashes(seal, user_id)
    phrase_terms = _phrase_terms(q)
    params: dict[str, Any] = {
        "user": user_id,
        "partition": partition,
        "now": now,
        "category": category,
        "key_hash": seal.user_hash(user_id, "key", q.memory_key) if q.memory_key else None,
        "named": sorted(q.named),
        "all": hashed(list(q.terms)),
        "phrase_terms": sorted(hashed(phrase_terms)),
    }
    for i, term_hash in enumerate(params["all"]):
        params[f"p{i}"] = params[f"t{i}"] = term_hash
    for i, scope in enumerate(scopes):
        params[f"s{i}"] = scope.scope_type
        params[f"w{i}"] = scope.workspace_type
    sql = statements(
        table,
        tuple(q.terms.values()),
        bool(q.memory_key),
        len(scopes),
        category is not None,
    )

    query_hashes = dict(zip(params["all"], q.terms, strict=True))  # as `hashed_terms`

    def run(statement: bytes, **limits: int) -> list[dict[str, Any]]:
        fetched = cur.execute(statement, params | limits, prepare=PREPARE).fetchall()
        return opened_rows(fetched, seal, query_hashes, q)

    if q.terms:
        streams = [PHRASE] if phrase_terms == frozenset(q.terms) else [PHRASE, REST]
    else:
        streams = [KEY] if q.memory_key else []
    rows: list[dict[str, Any]] = []
    if streams:
        asked = dict.fromkeys(streams, wanted + SLACK)
        fetched: dict[int, list[dict[str, Any]]] = {s: [] for s in streams}
        pending = list(streams)
        while pending:
            for row in run(sql.top(pending), **{f"n{s}": asked[s] for s in pending}):
                fetched[row["stream"]].append(row)
            rows = [row for s in streams for row in fetched[s]]
            open_ = {s: fetched[s][-1] for s in streams if s != KEY and len(fetched[s]) == asked[s]}
            blocking = _blocking(q, rows, open_, wanted, now)
            if blocking is None:
                rows = [row for row in rows if not row["hidden"]]
                if open_:
                    return rows
                break
            asked[blocking] *= 4
            fetched[blocking] = []
            pending = [blocking]
    return _lower(q, sql, _stages(q, params), rows, wanted, run, now)


def _stages(q: Query, params: dict[str, Any]) -> list[Stage]:
    """The lower stages of this query, in the ranker's order, their parameters set."""
    specs: list[Stage] = []
    if q.terms:
        above = q.total
        for index, (m, subsets) in enumerate(levels(list(q.terms.values()))):
            for b, subset in enumerate(subsets):
                params[f"l{index}_{b}"] = [params["all"][i] for i in subset]
            specs.append(("level", index, len(subsets), m, above))
            above = m
        specs.append(("rest", above))
    if q.named:
        for i, name in enumerate(params["named"]):
            params[f"c{i}"] = name
        specs += [("category", False, len(q.named)), ("category", True, len(q.named))]
    return specs


def _blocking(
    q: Query,
    rows: Sequence[dict[str, Any]],
    open_: dict[int, dict[str, Any]],
    wanted: int,
    now: datetime,
) -> int | None:
    """None when the first `wanted` matches are certain (or every stream is exhausted), else the
    open stream whose bound stops it: the unfetched rows of a stream rank at or below its last."""
    if not open_:
        return None
    bounds = {
        s: judge(q, SearchRow.from_row(last), now, phrased=s == PHRASE).order
        for s, last in open_.items()
    }
    lowest = min(bounds, key=lambda s: bounds[s])
    certain = 0
    for row in rows:
        j = judge(q, SearchRow.from_row(row), now)
        certain += j.matches and not row["hidden"] and j.order < bounds[lowest]
    return None if certain >= wanted else lowest


def _lower(
    q: Query,
    sql: Statements,
    specs: Sequence[Stage],
    rows: list[dict[str, Any]],
    wanted: int,
    run: Run,
    now: datetime,
) -> list[dict[str, Any]]:
    """The top stage exhausted: add the lower stages one by one until `wanted` matches."""
    missing = wanted - sum(judge(q, SearchRow.from_row(row), now).matches for row in rows)
    for spec in specs:
        if missing <= 0:
            break
        n = missing
        while True:  # hidden rows take places: ask again for more until enough are visible
            found = run(sql.stage(spec), n=n)
            visible = [row for row in found if not row["hidden"]]
            if len(found) < n or len(visible) >= missing:
                break
            n *= 4
        rows += visible
        missing -= len(visible)
    return rows
