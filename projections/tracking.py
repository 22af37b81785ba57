"""Where each projection stands in the ledger, kept in the same transaction as its rows."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import Connection, Cursor
from psycopg.sql import SQL, Composed

from projections.envelope import Envelope
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

    A projection that raises is rolled back to its savepoint, reported to `failed` and left
    out (its position does not move); the others, rows and positions, commit together. So a
    batch costs one commit, not one per projection, and a broken projection still never holds
    the others back. Database errors that break the connection (OperationalError) propagate:
    then nothing of the batch is committed. Returns the projections that applied the batch.
    """
    done: list[Projection] = []
    with conn.transaction():
        for projection in projections:
            try:
                with conn.transaction(), conn.cursor() as cur:
                    position = locked_position(cur, t, projection.name)
                    pending = [e for e in batch if e.position > position]
                    if pending:
                        projection.apply(cur, t, pending)
                        set_position(cur, t, projection.name, pending[-1].position)
            except psycopg.OperationalError:
                raise
            except Exception as error:
                failed(projection, error)
            else:
                done.append(projection)
    return done
