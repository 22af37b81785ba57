"""Events a projection cannot apply: set aside, so the projection moves on past them.

When a batch fails on an event (a value the database refuses, a handler that raises), the
batch is applied again one event at a time (`apply_each`), and each event that fails is
recorded in the quarantine table instead, inside the same transaction as the rows and the
position. What fails is classified by `projections.failures.failure`: a transient failure is
raised (the batch is retried whole later), an event that cannot be applied is quarantined, a
broken projection is raised.

A quarantine row names the projection, the position, the event's aggregate, version and
topic, and the error's class and SQLSTATE: never the event's content or the error's message
(a message may quote the value it refused).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import psycopg
from psycopg import Connection, Cursor
from psycopg.rows import dict_row
from psycopg.sql import SQL, Composed

from domain.ledger.positions import partition_of
from projections.base import Projection
from projections.envelope import Envelope
from projections.failures import failure
from projections.tracking import Tables

__all__ = [
    "QUARANTINE",
    "Quarantined",
    "apply_each",
    "apply_isolated",
    "copy_quarantine",
    "create_quarantine",
    "quarantine_counts",
    "quarantined",
]

QUARANTINE: Final = "projection_quarantine"
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One quarantined event (no content: ids, topic and the error's class and code)."""

    projection: str
    position: int
    originator_id: UUID
    version: int
    topic: str
    error_class: str
    error_code: str | None
    quarantined_at: datetime


def create_quarantine(t: Tables) -> list[Composed]:
    """DDL of the quarantine table."""
    return [
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " projection text NOT NULL,"
            " position bigint NOT NULL,"
            " originator_id uuid NOT NULL,"
            " version bigint NOT NULL,"
            " topic text NOT NULL,"
            " error_class text NOT NULL,"
            " error_code text NULL,"
            " quarantined_at timestamptz NOT NULL DEFAULT now(),"
            " partition int NOT NULL,"
            " PRIMARY KEY (partition, projection, position))"
        ).format(t[QUARANTINE])
    ]


def apply_isolated(
    conn: Connection[Any],
    cur: Cursor[Any],
    projection: Projection,
    t: Tables,
    events: Sequence[Envelope],
) -> int:
    """Apply `events` to the projection in a savepoint, else `apply_each`; returns how many
    events it quarantined."""
    if _attempt(conn, cur, projection, t, events) is None:
        return 0
    return apply_each(conn, cur, projection, t, events)


def apply_each(
    conn: Connection[Any],
    cur: Cursor[Any],
    projection: Projection,
    t: Tables,
    events: Sequence[Envelope],
) -> int:
    """Apply `events` one by one, each in a savepoint, quarantining those the projection cannot
    apply; returns how many it quarantined. The caller's transaction holds the rows and the
    quarantine alike.

    Raises what is not an event's failure (transient or broken) without quarantining.
    """
    set_aside = 0
    for envelope in events:
        error = _attempt(conn, cur, projection, t, [envelope])
        if error is not None:
            _record(cur, t, projection.name, envelope, error)
            set_aside += 1
    return set_aside


def _attempt(
    conn: Connection[Any],
    cur: Cursor[Any],
    projection: Projection,
    t: Tables,
    events: Sequence[Envelope],
) -> Exception | None:
    """Apply in a savepoint; an event's failure is rolled back and returned, others raised."""
    try:
        with conn.transaction():
            projection.apply(cur, t, events)
    except Exception as error:
        if failure(error, conn) != "event":
            raise
        return error
    return None


def _record(
    cur: Cursor[Any], t: Tables, name: str, envelope: Envelope, error: BaseException
) -> None:
    code = error.sqlstate if isinstance(error, psycopg.Error) else None
    _log.error(
        "projection %s quarantined the event at position %s (%s, %s %s)",
        name,
        envelope.position,
        envelope.topic,
        type(error).__name__,
        code or "-",
    )
    cur.execute(
        SQL(
            "INSERT INTO {} (projection, position, originator_id, version, topic, error_class,"
            " error_code, partition) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (partition, projection, position)"
            " DO UPDATE SET error_class = EXCLUDED.error_class,"
            " error_code = EXCLUDED.error_code, quarantined_at = now()"
        ).format(t[QUARANTINE]),
        (
            name,
            envelope.position,
            envelope.originator_id,
            envelope.version,
            envelope.topic,
            type(error).__name__,
            code,
            envelope.partition,
        ),
    )


def quarantined(
    conn: Connection[Any],
    t: Tables,
    projections: Sequence[str] = (),
    position: int | None = None,
) -> list[Quarantined]:
    """The quarantined events (of these projections, at this position), in ledger order."""
    names = list(projections)
    where = [SQL("(cardinality(%s::text[]) = 0 OR projection = ANY(%s))")]
    params: list[Any] = [names, names]
    if position is not None:  # one partition's
        where.append(SQL("partition = %s AND position = %s"))
        params += [partition_of(position), position]
    query = SQL(
        "SELECT projection, position, originator_id, version, topic, error_class, error_code,"
        " quarantined_at FROM {} WHERE {} ORDER BY position, projection"
    ).format(t[QUARANTINE], SQL(" AND ").join(where))
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query, params).fetchall()
    return [Quarantined(**row) for row in rows]


def quarantine_counts(conn: Connection[Any], t: Tables) -> dict[str, int]:
    """How many events each projection has quarantined (projections with none are left out)."""
    rows = conn.execute(
        SQL("SELECT projection, count(*) FROM {} GROUP BY projection").format(t[QUARANTINE])
    ).fetchall()
    return {row[0]: int(row[1]) for row in rows}


def copy_quarantine(conn: Connection[Any], fresh: Tables, live: Tables, name: str) -> int:
    """Replace the live quarantine of projection `name` with a rebuild's; returns how many
    entries differed (ignoring when each was recorded)."""
    columns = SQL(
        "projection, position, originator_id, version, topic, error_class, error_code, partition"
    )
    differed = conn.execute(
        SQL(
            "SELECT (SELECT count(*) FROM (SELECT {c} FROM {a} WHERE projection = %s"
            " EXCEPT ALL SELECT {c} FROM {b} WHERE projection = %s) x)"
            " + (SELECT count(*) FROM (SELECT {c} FROM {b} WHERE projection = %s"
            " EXCEPT ALL SELECT {c} FROM {a} WHERE projection = %s) y)"
        ).format(c=columns, a=live[QUARANTINE], b=fresh[QUARANTINE]),
        (name, name, name, name),
    ).fetchone()
    conn.execute(SQL("DELETE FROM {} WHERE projection = %s").format(live[QUARANTINE]), (name,))
    conn.execute(
        SQL("INSERT INTO {0} ({1}) SELECT {1} FROM {2} WHERE projection = %s").format(
            live[QUARANTINE], columns, fresh[QUARANTINE]
        ),
        (name,),
    )
    return int(differed[0]) if differed else 0
