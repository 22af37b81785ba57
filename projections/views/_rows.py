"""Batch helpers: fold a batch of events into row inserts, partial updates and deletes.

Rows are written with binary COPY (new rows) and one `UPDATE ... FROM unnest(...)` per set of
changed columns (older rows), so a batch costs a few statements whatever its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from projections.tracking import Tables

__all__ = [
    "PARTITION",
    "Column",
    "ReadSource",
    "RowChanges",
    "TableLayout",
    "array_literal",
    "copy_rows",
    "update_rows",
]


@dataclass(frozen=True)
class Column:
    """A column of a view table, declared once for its CREATE TABLE and its binary COPY.

    `type` is PostgreSQL's own short name, the one binary COPY needs (uuid, text, int4, int8,
    timestamptz, text[], bytea): a table whose declared type differs from the copied one
    cannot be filled.
    """

    name: str
    type: str
    nullable: bool = False


PARTITION = Column("partition", "int4")
"""The ledger partition of a row's user (issue 27): the last column of every view table, the
first of its primary key and unique indexes, and in the WHERE of every statement on one
user's, one memory's or one partition's rows (on Citus, the distribution column: such a
statement runs on the one node holding the partition). Last, because a table made by the
release before it gains the column by ADD COLUMN (projections/repartition.py), and a rebuild
compares tables column by column."""


@dataclass(frozen=True)
class TableLayout:
    """A view table's columns, declared once for its CREATE TABLE, its binary COPY and its reads.

    `key` is the row's key within its partition, `columns` the others in table order (a
    rebuild compares tables by position), then `partition` (PARTITION); the primary key is
    (partition, key). `names` and `types` are what `RowChanges` needs: `changes` builds one.
    """

    key: Column
    columns: tuple[Column, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the columns after the key, in order."""
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> dict[str, str]:
        """The type of the key and of every column."""
        return {c.name: c.type for c in (self.key, *self.columns)}

    def create(self, table: Composed) -> Composed:
        """CREATE TABLE IF NOT EXISTS: `key`, the columns in order, `partition`; the primary
        key (partition, key)."""
        parts = [
            SQL("{} {} {}").format(
                Identifier(c.name), SQL(c.type), SQL("NULL" if c.nullable else "NOT NULL")
            )
            for c in (self.key, *self.columns, PARTITION)
        ]
        parts.append(SQL("PRIMARY KEY (partition, {})").format(Identifier(self.key.name)))
        return SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(table, SQL(", ").join(parts))

    def changes(self, table: Composed, partition: int) -> RowChanges:
        """An empty `RowChanges` of `table` (laid out like this) in one partition, keyed by
        `key`."""
        return RowChanges(table, self.key.name, self.names, self.types, partition)


def copy_rows(
    cur: Cursor[Any],
    table: Composed,
    names: Sequence[str],
    types: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> None:
    """Insert rows with one binary COPY (the caller knows none of them exists yet).

    `types` are the PostgreSQL types of the columns, exactly as the table declares them
    (binary COPY does not convert): uuid, text, boolean, int4, int8, timestamptz.
    """
    statement = SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        table, SQL(", ").join(map(Identifier, names))
    )
    with cur.copy(statement) as copy:
        copy.set_types(list(types))
        write = copy.write_row
        for row in rows:
            write(row)


def update_rows(
    cur: Cursor[Any],
    table: Composed,
    key: str,
    names: Sequence[str],
    types: Mapping[str, str],
    rows: Sequence[Sequence[Any]],
    partition: int,
) -> None:
    """Set columns `names` of existing rows of one partition, in one statement: rows are
    (key, *values).

    An array column is sent as one text per row and made an array on the server: `unnest` of
    an array of arrays would flatten it. An `int8[]` as "1,2,3" through `string_to_array`
    (IMMUTABLE): Citus refuses a STABLE function on a column in an UPDATE, which the cast of an
    array literal (`array_in`) is (tests/citus: the rebuild equal to live); a `text[]` as a
    literal and cast (on a plain PostgreSQL only: no view updates one).
    """
    if not rows:
        return
    columns = [key, *names]
    arrays = [list(column) for column in zip(*rows, strict=True)]
    sent, values = [], []
    for index, name in enumerate(columns):
        kind = types[name]
        if kind == "int8[]":
            arrays[index] = [None if v is None else ",".join(map(str, v)) for v in arrays[index]]
            sent.append(SQL("%b::text[]"))
            values.append(SQL("string_to_array(v.{}, ',')::int8[]").format(Identifier(name)))
        elif kind.endswith("[]"):
            arrays[index] = [None if v is None else array_literal(v) for v in arrays[index]]
            sent.append(SQL("%b::text[]"))
            values.append(SQL("v.{}::" + kind).format(Identifier(name)))
        else:
            sent.append(SQL("%b::" + kind + "[]"))
            values.append(SQL("v.{}").format(Identifier(name)))
    cur.execute(
        SQL(
            "UPDATE {} AS t SET {} FROM unnest({}) AS v({}) WHERE t.partition = %s AND t.{} = v.{}"
        ).format(
            table,
            SQL(", ").join(
                SQL("{} = {}").format(Identifier(c), value)
                for c, value in zip(names, values[1:], strict=True)
            ),
            SQL(", ").join(sent),
            SQL(", ").join(map(Identifier, columns)),
            Identifier(key),
            Identifier(key),
        ),
        [*arrays, partition],
    )


def array_literal(items: Sequence[str] | Sequence[int]) -> str:
    """The text form of a one-dimensional array of strings (every element quoted) or of
    integers."""
    if not items:
        return "{}"
    if not isinstance(items[0], str):
        return "{" + ",".join(map(str, items)) + "}"
    together = "".join(items)
    if '"' in together or "\\" in together:
        items = [i.replace("\\", "\\\\").replace('"', '\\"') for i in items]
    return '{"' + '","'.join(items) + '"}'


class RowChanges:
    """What a batch does to the rows of one partition of a table keyed by (partition, a uuid
    column), in the order SQL must do it.

    A row created in this batch is kept whole in memory and later events change it there; an
    older row collects column updates; a deletion drops both. `flush` then writes one
    statement per kind of change instead of one per event.

    Events are applied exactly once, so a row created in this batch cannot exist yet: new
    rows are copied in, never upserted. `types` maps the key and every column to its type
    (see `copy_rows`).
    """

    def __init__(
        self,
        table: Composed,
        key: str,
        columns: Sequence[str],
        types: Mapping[str, str],
        partition: int,
    ) -> None:
        self.table = table
        self.partition = partition
        self.key = key
        self.columns = list(columns)
        self.types = types
        self.new: dict[UUID, dict[str, Any]] = {}
        self.updates: dict[UUID, dict[str, Any]] = {}
        self.deleted: set[UUID] = set()

    def insert(self, key: UUID, row: dict[str, Any]) -> None:
        """A new row (all columns)."""
        if self.deleted:
            self.deleted.discard(key)
        self.new[key] = row

    def update(self, key: UUID, **values: Any) -> None:
        """Set columns of a row, whether created in this batch or before."""
        self.change(key, values)

    def change(self, key: UUID, values: dict[str, Any]) -> None:
        """`update` with the values in a dict, which is kept (pass a fresh one)."""
        row = self.new.get(key)
        if row is not None:
            row.update(values)
        elif not self.deleted or key not in self.deleted:
            stored = self.updates.get(key)
            if stored is None:
                self.updates[key] = values
            else:
                stored.update(values)

    def delete(self, key: UUID) -> None:
        """Remove a row."""
        self.new.pop(key, None)
        self.updates.pop(key, None)
        self.deleted.add(key)

    def flush(self, cur: Cursor[Any]) -> None:
        """Write the batch's changes: deletes, new rows, grouped column updates."""
        partition = self.partition
        if self.deleted:
            cur.execute(
                SQL("DELETE FROM {} WHERE partition = %s AND {} = ANY(%s)").format(
                    self.table, Identifier(self.key)
                ),
                (partition, list(self.deleted)),
            )
        if self.new:
            columns = self.columns
            copy_rows(
                cur,
                self.table,
                [self.key, *columns, PARTITION.name],
                [*(self.types[c] for c in (self.key, *columns)), PARTITION.type],
                ([key, *map(row.__getitem__, columns), partition] for key, row in self.new.items()),
            )
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for key, values in self.updates.items():
            names = tuple(sorted(values))
            groups.setdefault(names, []).append((key, *map(values.__getitem__, names)))
        for names, rows in groups.items():
            update_rows(cur, self.table, self.key, names, self.types, rows, partition)


class ReadSource(Protocol):
    """Where a view's query functions read: its tables, and a way to run one statement.

    `projections.reads.Reads` is the one implementation (each call takes a pooled connection).
    """

    t: Tables

    def partition(self, user_id: str) -> int:
        """The ledger partition of the user (the `partition` of all their rows)."""
        ...

    def all(
        self, query: Composed, params: Sequence[Any] | Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """Every row of `query` as a dict."""
        ...

    def each(
        self, statements: Sequence[tuple[Composed, Sequence[Any] | Mapping[str, Any]]]
    ) -> list[list[dict[str, Any]]]:
        """Every row of each (query, params) as dicts, one list per statement."""
        ...
