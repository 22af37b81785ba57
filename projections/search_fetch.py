"""The narrow candidate fetch of `search_core_memories`: a few search_terms rows, never all.

`fetch_candidates` returns the user's live, visible, unshadowed rows among which
`LexicalRanker` finds its first `limit`, so that ranking them gives exactly the answer of
ranking all the user's memories. It walks the ranker's order in SQL and stops as soon as the
first `limit` are certain:

1. Top: the rows holding the query as key, or every query term (GIN `@>`: an intersection of
   posting lists). Only these can contain the query as a phrase, which SQL cannot test; it
   sorts them in two streams by the rest of the ranker's order: the rows holding every term of
   the phrase's words (`document_terms`, stop words and all bigrams included: necessary for the
   phrase) and the others (which cannot hold it). Each stream's last row bounds the ranker's key
   of every row not fetched from it; a fetched match whose key is below every open stream's
   bound is certain. When fewer than `limit` are, the stream with the lowest bound is fetched
   again with four times the rows, until it is exhausted.
2. Levels, once the top stage is exhausted and still short: lower matched term weight, level
   by level (weight at least m, via GIN `@>` on the minimal term subsets reaching m), then any
   shared term (`&&`), then rows only of a category the query names, newest first (not yet due
   for review, then due). Here SQL's order is the ranker's, so each level asks only for the
   matches still missing.

A global row hidden by a live visible workspace row with its key is dropped after sorting, so
that check runs only on rows actually returned. The fetch reads the query as the ranker does
(`LexicalQuery`, `document_terms` of its phrase).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import combinations
from typing import Any, Final

from psycopg import Cursor
from psycopg.sql import SQL, Composable, Composed, Literal

from domain.model.values import Scope
from projections.search import MAX_LIMIT, MIN_MATCHED, Candidate, LexicalQuery, document_terms
from projections.views.search_terms import COLUMNS, SEP

__all__ = ["SLACK", "fetch_candidates", "levels"]

SLACK: Final = 2
"""Rows fetched beyond `limit` per top stream at first, so a false stand-in costs no refetch."""
MAX_TERMS_FOR_LEVELS: Final = 6
MAX_BRANCHES: Final = 6
MAX_LEVELS: Final = 2
PREPARE: Final = True
"""Prepared: parsing is saved; PostgreSQL still plans GIN lookups with the actual terms (custom
plans cost less than a generic one there), and the user check is kept off the btree indexes."""
KEY, PHRASE, REST = 0, 1, 2  # the top streams

_COLUMNS = SQL(", ").join(SQL(c) for c in ("memory_id", *COLUMNS))
_DUE = SQL(
    "coalesce(review_after <= %(now)s AND (last_confirmed_at IS NULL"
    " OR last_confirmed_at < review_after), false)"
)


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


def _phrase_terms(q: LexicalQuery) -> frozenset[str]:
    """Terms every row containing the phrase holds (single CJK characters of a bigram implied)."""
    terms = document_terms(q.phrase) if q.phrase else frozenset()
    implied = {char for term in terms if len(term) == 2 for char in term}
    return frozenset(t for t in terms if not (len(t) == 1 and t in implied))


def _in_scope(alias: str, count: int) -> Composed:
    """`(scope_type, workspace_type)` is one of `count` scopes passed as %(s<i>)s, %(w<i>)s."""
    return SQL(" OR ").join(
        SQL(
            f"({alias}scope_type = %(s{i})s"
            f" AND {alias}workspace_type IS NOT DISTINCT FROM %(w{i})s)"
        )
        for i in range(count)
    )


def _sum(parts: list[Composable]) -> Composable:
    return SQL("({})").format(SQL(" + ").join(parts)) if parts else SQL("0")


class _Statements:
    """The SQL of each stage for one query shape, rendered once; parameters are named."""

    def __init__(
        self, table: str, weights: tuple[int, ...], has_key: bool, scopes: int, category: bool
    ) -> None:
        self.table = SQL(table)  # rendered from an Identifier
        self.rendered: dict[tuple[Any, ...], bytes] = {}
        live = SQL(
            " AND status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s) AND ({}){}"
        ).format(
            _in_scope("", scopes), SQL(" AND category = %(category)s") if category else SQL("")
        )
        # Terms are user-prefixed, so a GIN lookup meets only the user's rows; written plainly,
        # the user check makes the planner AND the GIN bitmap with all the user's btree entries.
        self.live = SQL("user_id = %(user)s{}").format(live)
        self.live_by_terms = SQL("user_id || '' = %(user)s{}").format(live)
        self.hiding = SQL(
            "NOT (c.scope_type = 'global' AND EXISTS (SELECT 1 FROM {} w"
            " WHERE w.user_id = %(user)s AND w.memory_key = c.memory_key"
            " AND w.scope_type = 'workspace' AND w.status = 'active'"
            " AND (w.expires_at IS NULL OR w.expires_at > %(now)s) AND ({})))"
        ).format(self.table, _in_scope("w.", scopes))
        self.matched = _sum(
            [
                SQL(f"CASE WHEN %(p{i})s = ANY(terms) THEN {w:d} ELSE 0 END")
                for i, w in enumerate(weights)
            ]
        )
        key_matched = _sum(
            [
                SQL(f"CASE WHEN %(t{i})s = ANY(key_terms) THEN {w:d} ELSE 0 END")
                for i, w in enumerate(weights)
            ]
        )
        self.not_key = SQL(" AND memory_key <> %(key)s") if has_key else SQL("")
        # The ranker's order after key, phrase and coverage.
        self.tail = SQL("{}category = ANY(%(named)s) DESC, {}, updated_at DESC, memory_id").format(
            SQL("{} DESC, ").format(key_matched) if weights else SQL(""), _DUE
        )

    def _select(
        self, stream: int, where: Composable, order: Composable, limit: str, by_terms: bool = True
    ) -> Composed:
        """Live rows where `where`, in `order`, unshadowed, tagged with `stream`.

        Rows found by terms are sorted whole (a GIN scan has no order), and only then checked
        for a hiding workspace row, lazily, up to the limit; rows found by a btree come in order.
        """
        if by_terms:
            text = (
                "(SELECT {stream} AS stream, * FROM (SELECT {columns} FROM {table}"
                " WHERE {live} AND ({where}) ORDER BY {order} OFFSET 0) c WHERE {hiding}{limit})"
            )
        else:
            text = (
                "(SELECT {stream} AS stream, {columns} FROM {table} c"
                " WHERE {live} AND ({where}) AND {hiding} ORDER BY {order}{limit})"
            )
        return SQL(text).format(
            stream=Literal(stream),
            columns=_COLUMNS,
            table=self.table,
            live=self.live_by_terms if by_terms else self.live,
            where=where,
            order=order,
            hiding=self.hiding,
            limit=SQL(f" LIMIT %({limit})s") if limit else SQL(""),
        )

    def _render(self, key: tuple[Any, ...], build: Callable[[], Composed]) -> bytes:
        if key not in self.rendered:
            self.rendered[key] = build().as_bytes(None)
        return self.rendered[key]

    def top(self, streams: Sequence[int]) -> bytes:
        """The top stage's streams (key: all; phrase, rest: %(n1)s, %(n2)s rows), one statement."""
        parts = {
            KEY: lambda: self._select(
                KEY, SQL("memory_key = %(key)s"), SQL("memory_id"), "", by_terms=False
            ),
            PHRASE: lambda: self._select(
                PHRASE, SQL("terms @> %(phrase_terms)s{}").format(self.not_key), self.tail, "n1"
            ),
            REST: lambda: self._select(
                REST,
                SQL("terms @> %(all)s AND NOT terms @> %(phrase_terms)s{}").format(self.not_key),
                self.tail,
                "n2",
            ),
        }
        return self._render(
            ("top", *streams), lambda: SQL(" UNION ALL ").join(parts[s]() for s in streams)
        )

    def level(self, index: int, subsets: int, least: int, above: int) -> bytes:
        """Rows whose matched weight is in [least, above), via %(l<index>_<b>)s term subsets."""

        def build() -> Composed:
            branches = SQL(" OR ").join(SQL(f"terms @> %(l{index}_{b})s") for b in range(subsets))
            where = SQL("({}) AND {m} >= {} AND {m} < {}{}").format(
                branches, Literal(least), Literal(above), self.not_key, m=self.matched
            )
            order = SQL("{} DESC, {}").format(self.matched, self.tail)
            return self._select(REST, where, order, "n")

        return self._render(("level", index, subsets, least, above), build)

    def rest(self, above: int) -> bytes:
        """Rows sharing any term, matched weight below `above`, that still match."""

        def build() -> Composed:
            where = SQL(
                "terms && %(all)s AND {m} < {} AND ({m} >= {} OR category = ANY(%(named)s)){}"
            ).format(Literal(above), Literal(MIN_MATCHED), self.not_key, m=self.matched)
            order = SQL("{} DESC, {}").format(self.matched, self.tail)
            return self._select(REST, where, order, "n")

        return self._render(("rest", above), build)

    def category_only(self, due: bool, categories: int) -> bytes:
        """Rows of a named category (%(c<i>)s) sharing no term, newest first, (not) due.

        One ordered btree walk per category (`= ANY` would lose the index order), merged.
        """

        def build() -> Composed:
            def one(i: int) -> Composed:
                where = SQL(f"category = %(c{i})s AND NOT (terms && %(all)s) AND {{}}{{}}{{}}")
                return self._select(
                    REST,
                    where.format(SQL("") if due else SQL("NOT "), _DUE, self.not_key),
                    SQL("updated_at DESC, memory_id"),
                    "n",
                    by_terms=False,
                )

            if categories == 1:
                return one(0)
            return SQL(
                "(SELECT * FROM ({}) u ORDER BY updated_at DESC, memory_id LIMIT %(n)s)"
            ).format(SQL(" UNION ALL ").join(one(i) for i in range(categories)))

        return self._render(("category", due, categories), build)


@lru_cache(maxsize=256)
def _statements(
    table: str, weights: tuple[int, ...], has_key: bool, scopes: int, category: bool
) -> _Statements:
    return _Statements(table, weights, has_key, scopes, category)


def fetch_candidates(
    cur: Cursor[dict[str, Any]],
    table: Composed,
    user_id: str,
    scopes: Sequence[Scope],
    query: str,
    *,
    now: datetime,
    category: str | None = None,
    limit: int = MAX_LIMIT,
) -> list[dict[str, Any]]:
    """The rows `search` needs for `query` (see the module docstring), terms unprefixed.

    `cur` must use a dict row factory; `table` is the search_terms table.
    """
    if not scopes:
        return []
    q = LexicalQuery.of(query)
    wanted = max(1, min(limit, MAX_LIMIT))
    prefix = user_id + SEP
    phrase_terms = _phrase_terms(q)
    params: dict[str, Any] = {
        "user": user_id,
        "now": now,
        "category": category,
        "key": q.key or None,
        "named": sorted(q.named),
        "all": [prefix + t for t in q.terms],
        "phrase_terms": sorted(prefix + t for t in phrase_terms),
    }
    for i, term in enumerate(q.terms):
        params[f"p{i}"] = prefix + term
        params[f"t{i}"] = term
    for i, scope in enumerate(scopes):
        params[f"s{i}"] = scope.scope_type
        params[f"w{i}"] = scope.workspace_type
    statements = _statements(
        table.as_string(None),
        tuple(q.terms.values()),
        bool(q.key),
        len(scopes),
        category is not None,
    )

    def run(statement: bytes, **limits: int) -> list[dict[str, Any]]:
        found = cur.execute(statement, params | limits, prepare=PREPARE).fetchall()
        for row in found:
            row["terms"] = frozenset(term[len(prefix) :] for term in row["terms"])
            row["key_terms"] = frozenset(row["key_terms"])
        return found

    streams = [KEY] if q.key else []
    if phrase_terms:
        streams.append(PHRASE)
    if q.terms and phrase_terms != frozenset(q.terms):
        streams.append(REST)
    fetched: dict[int, list[dict[str, Any]]] = {s: [] for s in streams}
    asked = dict.fromkeys(streams, wanted + SLACK)
    pending = list(streams)
    while pending:
        limits = {f"n{s}": asked[s] for s in pending}
        for row in run(statements.top(pending), **limits):
            fetched[row["stream"]].append(row)
        open_ = {s: fetched[s][-1] for s in streams if s != KEY and len(fetched[s]) == asked[s]}
        rows = [row for s in streams for row in fetched[s]]
        blocking = _blocking(q, rows, open_, wanted, now)
        if blocking is None:
            return rows if open_ else _rest(q, statements, params, rows, wanted, run, now)
        asked[blocking] *= 4
        fetched[blocking] = []
        pending = [blocking]
    return _rest(q, statements, params, [], wanted, run, now)


def _blocking(
    q: LexicalQuery,
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
        s: q.judge(Candidate.from_row(last), now, phrased=s == PHRASE)[1]
        for s, last in open_.items()
    }
    lowest = min(bounds, key=lambda s: bounds[s])
    certain = 0
    for row in rows:
        match, order, _ = q.judge(Candidate.from_row(row), now)
        certain += match and order < bounds[lowest]
    return None if certain >= wanted else lowest


def _rest(
    q: LexicalQuery,
    statements: _Statements,
    params: dict[str, Any],
    rows: list[dict[str, Any]],
    wanted: int,
    run: Callable[..., list[dict[str, Any]]],
    now: datetime,
) -> list[dict[str, Any]]:
    """The top stage exhausted: add the levels below it until `wanted` matches are known."""
    missing = wanted - sum(q.judge(Candidate.from_row(row), now)[0] for row in rows)
    stages: list[bytes] = []
    if q.terms:
        above = q.total
        for index, (m, subsets) in enumerate(levels(list(q.terms.values()))):
            for b, subset in enumerate(subsets):
                params[f"l{index}_{b}"] = [params["all"][i] for i in subset]
            stages.append(statements.level(index, len(subsets), m, above))
            above = m
        stages.append(statements.rest(above))
    if q.named:
        for i, name in enumerate(params["named"]):
            params[f"c{i}"] = name
        for due in (False, True):
            stages.append(statements.category_only(due, len(q.named)))
    for statement in stages:
        if missing <= 0:
            break
        found = run(statement, n=missing)
        rows += found
        missing -= len(found)
    return rows
