"""Search terms: each live memory with the ranker's document terms, under a per-user GIN index.

`terms` holds `index_terms(memory_key, content)` (projections/views/terms.py), each prefixed with
`user_id:` so that a GIN lookup only meets the user's own rows. A forgotten memory leaves no
row; a memory whose personal fields were redacted keeps its row but has no terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.model.events import REDACTED
from domain.model.values import Scope
from projections.base import Projection
from projections.envelope import Envelope
from projections.tracking import Tables
from projections.views._memory_rows import (
    MEMORY_ID,
    STATE_BEFORE_CREATED,
    STATE_FROM_UPDATED,
    fold_memory_events,
)
from projections.views._rows import (
    Column,
    ReadSource,
    RowChanges,
    column_names,
    column_types,
    create_table,
)
from projections.views.terms import index_terms, key_terms

__all__ = ["COLUMNS", "SEP", "SearchTerms", "next_shadow_expiry", "prefixed_terms"]

SEP = ":"
TABLE = (
    *STATE_BEFORE_CREATED,
    *STATE_FROM_UPDATED,
    Column("terms", "text[]"),
    Column("key_terms", "text[]"),
)
COLUMNS = column_names(TABLE)
TYPES = column_types(MEMORY_ID, TABLE)


def stored_key_terms(memory_key: str) -> list[str]:
    """The terms of the key's words alone (sorted, unprefixed); none when redacted."""
    return [] if memory_key == REDACTED else key_terms(memory_key)


def prefixed_terms(user_id: str, memory_key: str, content: str) -> list[str]:
    """The stored terms of a memory: sorted, each `user_id:term`; none when redacted."""
    if REDACTED in (memory_key, content):
        return []
    return [user_id + SEP + term for term in index_terms(memory_key, content)]


class SearchTerms(Projection):
    """One row per live memory (active or suppressed) with its search terms."""

    name = "search_terms"
    tables = ("search_terms",)

    def create(self, t: Tables) -> list[Composed]:
        table = t["search_terms"]
        return [
            create_table(table, MEMORY_ID, TABLE),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (terms)").format(
                t.index("search_terms", "terms"), table
            ),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, memory_key)").format(
                t.index("search_terms", "user_key"), table
            ),
            # The newest rows of a category first: a query that only names a category reads a
            # few index entries instead of sorting all the user's rows of it.
            SQL("DROP INDEX IF EXISTS {}.{}").format(
                Identifier(t.schema), t.index("search_terms", "user_category")
            ),
            SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {}"
                " (user_id, category, updated_at DESC, memory_id)"
            ).format(t.index("search_terms", "user_category_recent"), table),
            # The next expiry of a workspace memory (it may hide a global one): the search
            # cache keeps no result past it.
            SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} (user_id, expires_at)"
                " WHERE scope_type = 'workspace' AND expires_at IS NOT NULL"
            ).format(t.index("search_terms", "workspace_expiry"), table),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        rows = RowChanges(t["search_terms"], "memory_id", COLUMNS, TYPES)
        fold_memory_events(rows, batch)
        for row in rows.new.values():
            row["terms"] = prefixed_terms(row["user_id"], row["memory_key"], row["content"])
            row["key_terms"] = stored_key_terms(row["memory_key"])
        _terms_of_changed_content(cur, rows)
        rows.flush(cur)


def _terms_of_changed_content(cur: Cursor[Any], rows: RowChanges) -> None:
    """Add new terms to the content changes of older rows (from their stored user and key)."""
    changed = [key for key, values in rows.updates.items() if "content" in values]
    if not changed:
        return
    cur.execute(
        SQL("SELECT memory_id, user_id, memory_key FROM {} WHERE memory_id = ANY(%s)").format(
            rows.table
        ),
        (changed,),
        binary=True,
    )
    updates = rows.updates
    for memory_id, user_id, memory_key in cur.fetchall():
        values = updates[memory_id]
        values["terms"] = prefixed_terms(user_id, memory_key, values["content"])


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
            "SELECT min(expires_at) AS at FROM {} WHERE user_id = %s AND status = 'active'"
            " AND scope_type = 'workspace' AND workspace_type = ANY(%s)"
            " AND expires_at > %s"
        ).format(src.t["search_terms"]),
        (user_id, workspaces, now),
    )
    return rows[0]["at"] if rows else None
