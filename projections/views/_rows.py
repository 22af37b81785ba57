"""Batch helpers: fold a batch of events into row upserts, partial updates and deletes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

__all__ = ["RowChanges"]


class RowChanges:
    """What a batch does to one table keyed by a uuid column, in the order SQL must do it.

    A row created in this batch is kept whole in memory and later events change it there; an
    older row collects column updates; a deletion drops both. `flush` then writes one
    statement per kind of change instead of one per event.
    """

    def __init__(self, table: Composed, key: str, columns: Sequence[str]) -> None:
        self.table = table
        self.key = key
        self.columns = list(columns)
        self.new: dict[UUID, dict[str, Any]] = {}
        self.updates: dict[UUID, dict[str, Any]] = {}
        self.deleted: set[UUID] = set()

    def insert(self, key: UUID, row: dict[str, Any]) -> None:
        """A new row (all columns)."""
        self.deleted.discard(key)
        self.new[key] = row

    def update(self, key: UUID, **values: Any) -> None:
        """Set columns of a row, whether created in this batch or before."""
        if key in self.deleted:
            return
        if key in self.new:
            self.new[key].update(values)
        else:
            self.updates.setdefault(key, {}).update(values)

    def delete(self, key: UUID) -> None:
        """Remove a row."""
        self.new.pop(key, None)
        self.updates.pop(key, None)
        self.deleted.add(key)

    def flush(self, cur: Cursor[Any]) -> None:
        """Write the batch's changes: deletes, upserts of new rows, grouped column updates."""
        if self.deleted:
            cur.execute(
                SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(self.table, Identifier(self.key)),
                (list(self.deleted),),
            )
        if self.new:
            names = [self.key, *self.columns]
            cur.executemany(
                SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}").format(
                    self.table,
                    SQL(", ").join(map(Identifier, names)),
                    SQL(", ").join(SQL("%s") for _ in names),
                    Identifier(self.key),
                    SQL(", ").join(
                        SQL("{0} = EXCLUDED.{0}").format(Identifier(c)) for c in self.columns
                    ),
                ),
                [(key, *(row[c] for c in self.columns)) for key, row in self.new.items()],
            )
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = defaultdict(list)
        for key, values in self.updates.items():
            names = tuple(sorted(values))
            groups[names].append((*(values[c] for c in names), key))
        for names, params in groups.items():
            cur.executemany(
                SQL("UPDATE {} SET {} WHERE {} = %s").format(
                    self.table,
                    SQL(", ").join(SQL("{} = %s").format(Identifier(c)) for c in names),
                    Identifier(self.key),
                ),
                params,
            )
