"""Where each projection stands in each ledger partition, kept in the same transaction as its
rows: one row per (projection, partition), holding the partition's own position (see
domain/ledger/positions.py), so each partition's events are applied exactly once per
projection, whichever worker applies them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, LiteralString

from psycopg import Connection, Cursor
from psycopg.sql import SQL, Composed, Identifier

from projections.sealed import RowSeal, seal_for

__all__ = [
    "PREFIX",
    "TRACKING",
    "Tables",
    "create_tracking",
    "lock_key",
    "locked_position",
    "read_positions",
    "reset_positions",
    "set_lock_timeout",
    "set_position",
]

PREFIX = "memledger_"


@dataclass(frozen=True, slots=True)
class Tables:
    """Maps a projection's logical table names to schema-qualified identifiers.

    `suffix` is empty for the live tables; a rebuild uses a unique suffix, so its tables (and
    the indexes PostgreSQL names after them) never collide with live ones.
    """

    schema: str
    suffix: str = ""

    def name(self, logical: str) -> str:
        """The bare table name."""
        return f"{PREFIX}{logical}{self.suffix}"

    def __getitem__(self, logical: str) -> Composed:
        return SQL("{}.{}").format(Identifier(self.schema), Identifier(self.name(logical)))

    @property
    def seal(self) -> RowSeal:
        """How this schema's views seal personal fields (`projections.sealed.seal_for`)."""
        return seal_for(self.schema)

    def index(self, logical: str, purpose: str) -> Identifier:
        """An index name; a rebuild renames its indexes to the live names when it swaps."""
        return Identifier(f"{self.name(logical)}__{purpose}")

    def create_index(self, logical: str, purpose: str, on: LiteralString) -> Composed:
        """CREATE INDEX IF NOT EXISTS the index `index(logical, purpose)` on the table; `on` is
        what follows the table's name: the columns (after any USING), then any WHERE."""
        return SQL("CREATE INDEX IF NOT EXISTS {} ON {} " + on).format(
            self.index(logical, purpose), self[logical]
        )


TRACKING = "projection_tracking"
LEGACY_TRACKING = "projection_positions"
"""The tracking table before partitions: one global position per projection (upgrade only)."""


def create_tracking(t: Tables) -> list[Composed]:
    """DDL of the tracking table."""
    return [
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " projection text NOT NULL,"
            " partition int NOT NULL,"
            " position bigint NOT NULL,"
            " updated_at timestamptz NOT NULL DEFAULT now(),"
            " PRIMARY KEY (partition, projection))"
        ).format(t[TRACKING])
    ]


def lock_key(schema: str, name: str) -> int:
    """The advisory lock id that lets one worker at a time run a projection."""
    digest = hashlib.sha256(f"memledger/{schema}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def set_lock_timeout(conn: Connection[Any], seconds: float) -> None:
    """`SET LOCAL lock_timeout` for the transaction `conn` is in (at least 1 ms: 0 is none)."""
    conn.execute(
        SQL("SELECT set_config('lock_timeout', %s, true)"), (f"{max(1, int(seconds * 1000))}ms",)
    )


def read_positions(conn: Connection[Any], t: Tables) -> dict[tuple[str, int], int]:
    """Every (projection, partition)'s position within the partition (missing: 0)."""
    rows = conn.execute(
        SQL("SELECT projection, partition, position FROM {}").format(t[TRACKING])
    ).fetchall()
    return {(row[0], row[1]): row[2] for row in rows}


def locked_position(cur: Cursor[Any], t: Tables, name: str, partition: int) -> int:
    """The projection's position in the partition, its tracking row locked until the
    transaction ends."""
    cur.execute(
        SQL(
            "INSERT INTO {} (projection, partition, position) VALUES (%s, %s, 0)"
            " ON CONFLICT DO NOTHING"
        ).format(t[TRACKING]),
        (name, partition),
    )
    cur.execute(
        SQL("SELECT position FROM {} WHERE projection = %s AND partition = %s FOR UPDATE").format(
            t[TRACKING]
        ),
        (name, partition),
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def set_position(cur: Cursor[Any], t: Tables, name: str, partition: int, position: int) -> None:
    """Advance the projection's position in the partition (inside the transaction that
    applied the events; its row was locked by `locked_position`)."""
    cur.execute(
        SQL(
            "UPDATE {} SET position = %s, updated_at = now()"
            " WHERE projection = %s AND partition = %s"
        ).format(t[TRACKING]),
        (position, name, partition),
    )


def reset_positions(cur: Cursor[Any], t: Tables, name: str) -> None:
    """Put the projection back before the first event of every partition."""
    cur.execute(SQL("DELETE FROM {} WHERE projection = %s").format(t[TRACKING]), (name,))
