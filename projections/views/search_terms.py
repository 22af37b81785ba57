"""Search terms: each live memory with the ranker's document terms, under a GIN index.

`terms` holds the keyed hashes (`RowSeal.hasher(user_id, "term")`, 64-bit integers) of
`index_terms(memory_key, content)` (projections/tokens.py, the tokeniser), never the words: the
user's key makes them the user's own, so a GIN lookup only meets the user's rows, and a query's
terms are hashed alike (`term_hashes`). Key and content are sealed like active_memories'. A
forgotten memory leaves no row; a memory whose personal fields were redacted keeps its row but
has no terms. `position` is the ledger position of the last event that changed the row: a
cached vector matrix (retrieval/vectors/matrix_load.py) reads only the rows changed since the
position it was read at.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.model.events import REDACTED
from domain.model.values import Scope
from projections.base import Projection
from projections.envelope import Envelope
from projections.sealed import RowSeal, vacuum_promptly
from projections.tokens import document_terms, index_terms, key_terms, searchable_text
from projections.tracking import Tables
from projections.views._memory_rows import (
    SEALED,
    fold_memory_events,
    memory_table,
    seal_memory_rows,
)
from projections.views._rows import Column, ReadSource, RowChanges

__all__ = [
    "COLUMNS",
    "READ_COLUMNS",
    "TABLE_NAME",
    "SearchTerms",
    "next_shadow_expiry",
    "open_search_rows",
    "owner_rows",
    "stored_key_terms",
    "stored_terms",
    "term_hashes",
]

TABLE_NAME = "search_terms"
TABLE = memory_table(
    Column("terms", "int8[]"), Column("key_terms", "int8[]"), Column("position", "int8")
)
COLUMNS = TABLE.names
READ_COLUMNS = tuple(c for c in COLUMNS if c != "position")
"""What search reads of a row (`position` only tells a cached vector matrix what changed)."""


def term_hashes(seal: RowSeal, user_id: str) -> Callable[[Collection[str]], list[int]]:
    """How the terms of this user are stored and looked up: keyed hashes, in order."""
    return seal.hasher(user_id, "term")


def stored_terms(seal: RowSeal, user_id: str, memory_key: str, content: str) -> list[int]:
    """The stored terms of a memory (of `index_terms`): hashed, sorted; none when redacted."""
    if REDACTED in (memory_key, content):
        return []
    return sorted(term_hashes(seal, user_id)(document_terms(searchable_text(memory_key, content))))


def stored_key_terms(seal: RowSeal, user_id: str, memory_key: str) -> list[int]:
    """The hashed terms of the key's words alone (of `key_terms`), sorted; none when redacted."""
    if memory_key == REDACTED:
        return []
    return sorted(term_hashes(seal, user_id)(document_terms(searchable_text(memory_key))))


def open_search_rows(
    rows: list[dict[str, Any]], seal: RowSeal, query_hashes: Mapping[int, str] | None = None
) -> list[dict[str, Any]]:
    """Fetched rows with key and content opened, and clear `terms` and `key_terms` (the stored
    ones are hashes): what ranking reads.

    With `query_hashes` (each query term's `term_hashes` hash -> the term), a row's terms are
    the query terms among its stored hashes: all that ranking reads of them (which query terms
    a row holds), without tokenising its text again. Without, they are computed again from key
    and content (`index_terms`, `key_terms`).
    """
    seal.open_rows(rows, TABLE_NAME, "memory_id", SEALED)
    for row in rows:
        row.pop("key_hash", None)
        memory_key, content = row["memory_key"], row["content"]
        if REDACTED in (memory_key, content):
            row["terms"], row["key_terms"] = frozenset(), frozenset()
        elif query_hashes is not None:
            row["terms"] = frozenset(query_hashes[h] for h in row["terms"] if h in query_hashes)
            row["key_terms"] = frozenset(
                query_hashes[h] for h in row["key_terms"] if h in query_hashes
            )
        else:
            row["terms"] = frozenset(index_terms(memory_key, content))
            row["key_terms"] = frozenset(key_terms(memory_key))
    return rows


class SearchTerms(Projection):
    """One row per live memory (active or suppressed) with its search terms."""

    name = "search_terms"
    stores_positions = True

    def create(self, t: Tables) -> list[Composed]:
        table = t["search_terms"]
        return [
            TABLE.create(table),
            vacuum_promptly(table),
            t.create_index("search_terms", "terms", "USING gin (terms)"),
            t.create_index("search_terms", "user_key", "(user_id, key_hash)"),
            t.create_index("search_terms", "user_position", "(user_id, position)"),
            # The newest rows of a category first: a query that only names a category reads a
            # few index entries instead of sorting all the user's rows of it.
            SQL("DROP INDEX IF EXISTS {}.{}").format(
                Identifier(t.schema), t.index("search_terms", "user_category")
            ),
            t.create_index(
                "search_terms",
                "user_category_recent",
                "(user_id, category, updated_at DESC, memory_id)",
            ),
            # The next expiry of a workspace memory (it may hide a global one): the search
            # cache keeps no result past it.
            t.create_index(
                "search_terms",
                "workspace_expiry",
                "(user_id, expires_at) WHERE scope_type = 'workspace' AND expires_at IS NOT NULL",
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = TABLE.changes(t["search_terms"], batch[0].partition)
        fold_memory_events(rows, batch, track_position=True)
        seal = t.seal
        for row in rows.new.values():
            user_id, memory_key = row["user_id"], row["memory_key"]
            row["terms"] = stored_terms(seal, user_id, memory_key, row["content"])
            row["key_terms"] = stored_key_terms(seal, user_id, memory_key)
        _terms_of_changed_content(cur, rows, seal)
        seal_memory_rows(rows, TABLE_NAME, seal)
        rows.flush(cur)


def _terms_of_changed_content(cur: Cursor[Any], rows: RowChanges, seal: RowSeal) -> None:
    """Add new terms to the content changes of older rows (from their stored user and key)."""
    changed = [key for key, values in rows.updates.items() if "content" in values]
    if not changed:
        return
    cur.execute(
        SQL(
            "SELECT memory_id, user_id, memory_key FROM {}"
            " WHERE partition = %s AND memory_id = ANY(%s)"
        ).format(rows.table),
        (rows.partition, changed),
        binary=True,
    )
    updates = rows.updates
    for memory_id, user_id, sealed_key in cur.fetchall():
        memory_key = seal.open(TABLE_NAME, memory_id, memory_id, "memory_key", sealed_key)
        values = updates[memory_id]
        values["terms"] = stored_terms(seal, user_id, memory_key, values["content"])


def next_shadow_expiry(
    src: ReadSource, user_id: str, scopes: Sequence[Scope], now: datetime
) -> datetime | None:
    """When the first of the user's visible, active workspace memories expires (or None).

    A workspace memory hides the global one with its key; when it expires, without any
    event, the global one becomes visible, so a cached search result must not outlive it.
    """
    workspaces = [s.workspace_type for s in scopes if s.scope_type == "workspace"]
    if not workspaces:
        return None
    rows = src.all(
        SQL(
            "SELECT min(expires_at) AS at FROM {} WHERE partition = %s AND user_id = %s"
            " AND status = 'active'"
            " AND scope_type = 'workspace' AND workspace_type = ANY(%s)"
            " AND expires_at > %s"
        ).format(src.t["search_terms"]),
        (src.partition(user_id), user_id, workspaces, now),
    )
    return rows[0]["at"] if rows else None


OWNER_FILTERS = ("scope_type", "workspace_type", "status", "category")
"""The columns the owner's search narrows by (`GET /me/core-memories?q=`'s filters)."""


def owner_rows(
    src: ReadSource, user_id: str, filters: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """Every live row of the user (any scope, active or suppressed, expired included) matching
    `filters` (OWNER_FILTERS, None: any), unopened: what the owner's search ranks.

    All of them, not the agent fetch's few: the owner's view has no visibility or shadowing
    rule to narrow by, and a user's memories are a few thousand at most.
    """
    where = [SQL("partition = %s AND user_id = %s")]
    params: list[Any] = [src.partition(user_id), user_id]
    for column in OWNER_FILTERS:
        if filters.get(column) is not None:
            where.append(SQL(f"{column} = %s"))
            params.append(filters[column])
    columns = SQL(", ").join(SQL(c) for c in ("memory_id", *COLUMNS))
    return src.all(
        SQL("SELECT {} FROM {} WHERE {}").format(
            columns, src.t["search_terms"], SQL(" AND ").join(where)
        ),
        tuple(params),
    )
