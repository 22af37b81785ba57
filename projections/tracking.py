"""Where each projection stands in the ledger, kept in the same transaction as its rows."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import Connection, Cursor
from psycopg.sql import SQL, Composed

from projections.envelope import Envelope
from projections.quarantine import apply_each, failure
from projections.sealed import RowSeal, seal_for

if TYPE_CHECKING:
    from projections.base import Projection
from dataclasses import dataclass

from psycopg.sql import Identifier

__all__ = [
    "PREFIX",
    "TRACKING",
    "Tables",
    "apply_batch",
    "create_tracking",
    "lock_key",
    "locked_position",
    "read_positions",
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


TRACKING = "projection_positions"


def create_tracking(t: Tables) -> list[Composed]:
    """DDL of the tracking table."""
    return [
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " projection text PRIMARY KEY,"
            " position bigint NOT NULL,"
            " updated_at timestamptz NOT NULL DEFAULT now())"
        ).format(t[TRACKING])
    ]


def lock_key(schema: str, name: str) -> int:
    """The advisory lock id that lets one worker at a time run a projection."""
    digest = hashlib.sha256(f"memledger/{schema}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def read_positions(conn: Connection[Any], t: Tables) -> dict[str, int]:
    """Every projection's position (missing: never ran)."""
    rows = conn.execute(SQL("SELECT projection, position FROM {}").format(t[TRACKING])).fetchall()
    return {row[0]: row[1] for row in rows}


def locked_position(cur: Cursor[Any], t: Tables, name: str) -> int:
    """The projection's position, its tracking row locked until the transaction ends."""
    cur.execute(
        SQL("INSERT INTO {} (projection, position) VALUES (%s, 0) ON CONFLICT DO NOTHING").format(
            t[TRACKING]
        ),
        (name,),
    )
    cur.execute(
        SQL("SELECT position FROM {} WHERE projection = %s FOR UPDATE").format(t[TRACKING]),
        (name,),
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def set_position(cur: Cursor[Any], t: Tables, name: str, position: int) -> None:
    """Advance the projection's position (inside the transaction that applied the events)."""
    cur.execute(
        SQL("UPDATE {} SET position = %s, updated_at = now() WHERE projection = %s").format(
            t[TRACKING]
        ),
        (position, name),
    )


def apply_batch(
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    batch: Sequence[Envelope],
    failed: Callable[[Projection, Exception], None],
) -> list[Projection]:
    """Apply the events each projection has not seen, and its new position, exactly once.

    Each projection's tracking row is locked first, so a concurrent runner waits and then skips
    what this one applied. All in one transaction, one savepoint per projection.

    An event a projection cannot apply is quarantined and its position moves past it, its
    other events applied (projections/quarantine.py). A projection that cannot run at all
    is rolled back to its savepoint, reported to `failed` and left out (its position does not
    move); the others, rows and positions, commit together. So a batch costs one commit, not
    one per projection, and a broken projection still never holds the others back. Transient
    database errors (the connection lost, a serialization failure, a timeout) propagate:
    then nothing of the batch is committed. Returns the projections that applied the batch.
    """
    done: list[Projection] = []
    with conn.transaction():
        for projection in projections:
            try:
                try:
                    _advance(conn, projection, t, batch, one_by_one=False)
                except Exception as error:  # an event's failure: again, one event at a time
                    if failure(error, conn) != "event":
                        raise
                    _advance(conn, projection, t, batch, one_by_one=True)
            except Exception as error:
                if failure(error, conn) == "transient":
                    raise
                failed(projection, error)
            else:
                done.append(projection)
    return done


def _advance(
    conn: Connection[Any],
    projection: Projection,
    t: Tables,
    batch: Sequence[Envelope],
    *,
    one_by_one: bool,
) -> None:
    """In a savepoint: lock the projection's position, apply the events after it (together,
    or `one_by_one`, quarantining those it cannot apply), and move it to the last."""
    with conn.transaction(), conn.cursor() as cur:
        position = locked_position(cur, t, projection.name)
        pending = [e for e in batch if e.position > position]
        if pending:
            if one_by_one:
                apply_each(conn, cur, projection, t, pending)
            else:
                projection.apply(cur, t, pending)
            set_position(cur, t, projection.name, pending[-1].position)
