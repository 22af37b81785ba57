"""Search terms: each live memory with the ranker's document terms, under a per-user GIN index.

`terms` holds `index_terms(memory_key, content)` (projections/search.py), each prefixed with
`user_id:` so that a GIN lookup only meets the user's own rows. A forgotten memory leaves no
row; a memory whose personal fields were redacted keeps its row but has no terms.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.model.events import REDACTED
from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.search import index_terms, key_terms
from projections.tables import Tables

__all__ = ["COLUMNS", "SEP", "SearchTerms", "prefixed_terms"]

SEP = ":"
COLUMNS = (
    "user_id",
    "memory_key",
    "content",
    "category",
    "scope_type",
    "workspace_type",
    "source_type",
    "status",
    "revision",
    "updated_at",
    "last_confirmed_at",
    "review_after",
    "expires_at",
    "terms",
    "key_terms",
)


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
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid PRIMARY KEY,"
                " user_id text NOT NULL,"
                " memory_key text NOT NULL,"
                " content text NOT NULL,"
                " category text NOT NULL,"
                " scope_type text NOT NULL,"
                " workspace_type text NULL,"
                " source_type text NOT NULL,"
                " status text NOT NULL,"
                " revision integer NOT NULL,"
                " updated_at timestamptz NOT NULL,"
                " last_confirmed_at timestamptz NULL,"
                " review_after timestamptz NULL,"
                " expires_at timestamptz NULL,"
                " terms text[] NOT NULL,"
                " key_terms text[] NOT NULL)"
            ).format(table),
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
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        table = t["search_terms"]
        new: dict[UUID, dict[str, Any]] = {}
        updates: dict[UUID, dict[str, Any]] = {}
        deleted: set[UUID] = set()
        for envelope in batch:
            event, key = envelope.event, envelope.originator_id
            values: dict[str, Any]
            match event:
                case Memory.Created():
                    deleted.discard(key)
                    new[key] = {
                        "user_id": event.user_id,
                        "memory_key": event.memory_key,
                        "content": event.content,
                        "category": event.category,
                        "scope_type": event.scope_type,
                        "workspace_type": event.workspace_type,
                        "source_type": event.source_type,
                        "status": "active",
                        "revision": 1,
                        "updated_at": event.timestamp,
                        "last_confirmed_at": None,
                        "review_after": event.review_after,
                        "expires_at": event.expires_at,
                    }
                    continue
                case Memory.ContentChanged():
                    values = {
                        "content": event.content,
                        "category": event.category,
                        "revision": event.revision,
                    }
                case Memory.Confirmed():
                    values = {"last_confirmed_at": event.timestamp}
                case Memory.Suppressed():
                    values = {"status": "suppressed"}
                case Memory.Restored():
                    values = {"status": "active"}
                case Memory.ScheduleChanged():
                    values = {"review_after": event.review_after, "expires_at": event.expires_at}
                case Memory.Forgotten():
                    new.pop(key, None)
                    updates.pop(key, None)
                    deleted.add(key)
                    continue
                case _:
                    continue  # not a memory event, or one this version does not know
            values["updated_at"] = event.timestamp
            if key in deleted:
                continue
            if key in new:
                new[key].update(values)
            else:
                updates.setdefault(key, {}).update(values)
        if deleted:
            cur.execute(
                SQL("DELETE FROM {} WHERE memory_id = ANY(%s)").format(table), (list(deleted),)
            )
        if new:
            names = SQL(", ").join(map(Identifier, ("memory_id", *COLUMNS)))
            with cur.copy(SQL("COPY {} ({}) FROM STDIN").format(table, names)) as copy:
                for key, row in new.items():
                    row["terms"] = prefixed_terms(row["user_id"], row["memory_key"], row["content"])
                    row["key_terms"] = stored_key_terms(row["memory_key"])
                    copy.write_row((key, *(row[c] for c in COLUMNS)))
        self._update(cur, table, updates)

    @staticmethod
    def _update(cur: Cursor[Any], table: Composed, updates: dict[UUID, dict[str, Any]]) -> None:
        changed = [key for key, values in updates.items() if "content" in values]
        if changed:  # new content: new terms, from the key and user already stored
            cur.execute(
                SQL(
                    "SELECT memory_id, user_id, memory_key FROM {} WHERE memory_id = ANY(%s)"
                ).format(table),
                (changed,),
            )
            for memory_id, user_id, memory_key in cur.fetchall():
                values = updates[memory_id]
                values["terms"] = prefixed_terms(user_id, memory_key, values["content"])
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = defaultdict(list)
        for key, values in updates.items():
            names = tuple(sorted(values))
            groups[names].append((*(values[c] for c in names), key))
        for names, params in groups.items():
            cur.executemany(
                SQL("UPDATE {} SET {} WHERE memory_id = %s").format(
                    table, SQL(", ").join(SQL("{} = %s").format(Identifier(c)) for c in names)
                ),
                params,
            )
