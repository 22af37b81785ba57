"""The SQL of the staged search fetch (retrieval/fetch.py), one shape at a time.

A `Statements` renders, once per query shape (term weights, key or not, scopes, category
filter), the statements the fetch runs; their parameters are named:

- %(user)s, %(partition)s (the user's ledger partition), %(now)s, %(category)s,
  %(key_hash)s (of the query read as a memory key), %(named)s: as the names say;
- %(all)s, %(phrase_terms)s: the keyed hashes of the query terms and phrase terms (int8[]);
- %(p<i>)s / %(t<i>)s: query term i's hash (for terms / key_terms);
- %(s<i>)s, %(w<i>)s: visible scope i;
- %(l<j>_<b>)s: term subset b of level j; %(c<i>)s: named category i;
- %(n1)s, %(n2)s: rows of the phrase and rest streams; %(n)s: rows of a lower stage.

Every row is tagged with its `stream` (0 key, 1 phrase, 2 rest: the top stage; 3 a lower
stage) and `hidden` (a global row a visible workspace row with its key hides).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Final

from psycopg.sql import SQL, Composable, Composed, Literal

from projections.views.search_terms import READ_COLUMNS as COLUMNS
from retrieval.query import MIN_MATCHED

__all__ = ["KEY", "PHRASE", "REST", "STAGE", "Stage", "Statements", "statements"]

KEY, PHRASE, REST, STAGE = 0, 1, 2, 3
"""Streams of the top stage, and the tag of a lower stage's rows."""

Stage = tuple[Any, ...]
"""("level", j, subsets, least, above) | ("rest", above) | ("category", due, count)."""

_COLUMNS: Final = SQL(", ").join(SQL(c) for c in ("memory_id", *COLUMNS))
_DUE: Final = SQL(
    "coalesce(review_after <= %(now)s AND (last_confirmed_at IS NULL"
    " OR last_confirmed_at < review_after), false)"
)


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


class Statements:
    """The SQL of each stage for one query shape, rendered once; parameters are named."""

    def __init__(
        self, table: str, weights: tuple[int, ...], has_key: bool, scopes: int, category: bool
    ) -> None:
        self.table = SQL(table)  # rendered from an Identifier
        self.has_key = has_key
        self.rendered: dict[tuple[Any, ...], bytes] = {}
        live = SQL(
            " AND status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s) AND ({}){}"
        ).format(
            _in_scope("", scopes), SQL(" AND category = %(category)s") if category else SQL("")
        )
        # Terms are hashed under the user's key, so a GIN lookup meets only the user's rows;
        # written plainly, the user check makes the planner AND the GIN bitmap with all the
        # user's btree entries.
        # Every reference to the table names the user's partition (on Citus, the one shard
        # holding the user: the statement, subqueries and all, runs there).
        self.live = SQL("partition = %(partition)s AND user_id = %(user)s{}").format(live)
        self.live_by_terms = SQL("partition = %(partition)s AND user_id || '' = %(user)s{}").format(
            live
        )
        # Checked on returned rows only, once per statement (each EXISTS costs planning time).
        self.hidden = SQL(
            "b.scope_type = 'global' AND EXISTS (SELECT 1 FROM {} w"
            " WHERE w.partition = %(partition)s AND w.user_id = %(user)s"
            " AND w.key_hash = b.key_hash"
            " AND w.scope_type = 'workspace' AND w.status = 'active'"
            " AND (w.expires_at IS NULL OR w.expires_at > %(now)s) AND ({}))"
        ).format(self.table, _in_scope("w.", scopes))
        self.matched = _sum(
            [
                SQL(f"CASE WHEN %(p{i})s::int8 = ANY(terms) THEN {w:d} ELSE 0 END")
                for i, w in enumerate(weights)
            ]
        )
        key_matched = _sum(
            [
                SQL(f"CASE WHEN %(t{i})s::int8 = ANY(key_terms) THEN {w:d} ELSE 0 END")
                for i, w in enumerate(weights)
            ]
        )
        self.not_key = SQL(" AND key_hash <> %(key_hash)s") if has_key else SQL("")
        # The ranker's order after key, phrase and coverage.
        self.tail = SQL("{}category = ANY(%(named)s) DESC, {}, updated_at DESC, memory_id").format(
            SQL("{} DESC, ").format(key_matched) if weights else SQL(""), _DUE
        )

    def _branch(
        self, stream: int, where: Composable, order: Composable, limit: str, by_terms: bool
    ) -> Composed:
        """Live rows where `where`, the first %(<limit>)s in `order` (all without a limit)."""
        return SQL(
            "(SELECT {stream} AS stream, {columns} FROM {table} WHERE {live} AND ({where})"
            " ORDER BY {order}{limit})"
        ).format(
            stream=Literal(stream),
            columns=_COLUMNS,
            table=self.table,
            live=self.live_by_terms if by_terms else self.live,
            where=where,
            order=order,
            limit=SQL(f" LIMIT %({limit})s") if limit else SQL(""),
        )

    def _statement(self, branches: Sequence[Composed]) -> Composed:
        """The branches' rows, each marked `hidden` when a visible workspace row holds its key
        (`shadow_global`'s rule); hidden rows still count toward their branch's limit."""
        return SQL("SELECT b.*, {} AS hidden FROM ({}) b").format(
            self.hidden, SQL(" UNION ALL ").join(branches)
        )

    def _render(self, shape: tuple[Any, ...], build: Callable[[], Composed]) -> bytes:
        if shape not in self.rendered:
            self.rendered[shape] = build().as_bytes(None)
        return self.rendered[shape]

    def top(self, streams: Sequence[int]) -> bytes:
        """The top stage: key rows (all; alone when the query has no terms), then the phrase
        stream (key rows first, then rows holding the phrase's terms: %(n1)s rows) and the
        rest stream (rows holding every term but not the phrase's: %(n2)s rows)."""

        def build() -> Composed:
            parts: list[Composed] = []
            by_key = SQL("user_id = %(user)s AND key_hash = %(key_hash)s")
            if KEY in streams:
                parts.append(self._branch(KEY, by_key, SQL("memory_id"), "", False))
            if PHRASE in streams:
                where: Composable = SQL("terms @> %(phrase_terms)s::int8[]")
                order: Composable = self.tail
                if self.has_key:  # one branch, not two: each costs planning time
                    where = SQL("{} OR ({})").format(where, by_key)
                    order = SQL("key_hash = %(key_hash)s DESC, {}").format(order)
                parts.append(self._branch(PHRASE, where, order, "n1", True))
            if REST in streams:
                where = SQL(
                    "terms @> %(all)s::int8[] AND NOT terms @> %(phrase_terms)s::int8[]{}"
                ).format(self.not_key)
                parts.append(self._branch(REST, where, self.tail, "n2", True))
            return self._statement(parts)

        return self._render(("top", *streams), build)

    def stage(self, spec: Stage) -> bytes:
        """One lower stage, at most %(n)s rows, in the ranker's order."""
        return self._render(("stage", *spec), lambda: self._statement([self._stage(spec)]))

    def _stage(self, spec: Stage) -> Composed:
        kind, *args = spec
        if kind == "level":
            index, subsets, least, above = args
            branches = SQL(" OR ").join(
                SQL(f"terms @> %(l{index}_{b})s::int8[]") for b in range(subsets)
            )
            where = SQL("({}) AND {m} >= {} AND {m} < {}{}").format(
                branches, Literal(least), Literal(above), self.not_key, m=self.matched
            )
            order = SQL("{} DESC, {}").format(self.matched, self.tail)
            return self._branch(STAGE, where, order, "n", True)
        if kind == "rest":
            (above,) = args
            where = SQL(
                "terms && %(all)s::int8[] AND {m} < {}"
                " AND ({m} >= {} OR category = ANY(%(named)s)){}"
            ).format(Literal(above), Literal(MIN_MATCHED), self.not_key, m=self.matched)
            order = SQL("{} DESC, {}").format(self.matched, self.tail)
            return self._branch(STAGE, where, order, "n", True)
        due, count = args

        # One ordered btree walk per category (`= ANY` would lose the index order), merged.
        def one(i: int) -> Composed:
            where = SQL(f"category = %(c{i})s AND NOT (terms && %(all)s::int8[]) AND {{}}{{}}{{}}")
            return self._branch(
                STAGE,
                where.format(SQL("") if due else SQL("NOT "), _DUE, self.not_key),
                SQL("updated_at DESC, memory_id"),
                "n",
                False,
            )

        if count == 1:
            return one(0)
        return SQL("(SELECT * FROM ({}) u ORDER BY updated_at DESC, memory_id LIMIT %(n)s)").format(
            SQL(" UNION ALL ").join(one(i) for i in range(count))
        )


@lru_cache(maxsize=256)
def statements(
    table: str, weights: tuple[int, ...], has_key: bool, scopes: int, category: bool
) -> Statements:
    """The statements of one query shape (cached): `table` is the rendered search_terms name."""
    return Statements(table, weights, has_key, scopes, category)
