"""The tables projections need, made at start-up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.sql import SQL
from psycopg_pool import ConnectionPool

from projections import layout
from projections.base import Projection
from projections.quarantine import create_quarantine
from projections.tracking import Tables, create_tracking, lock_key

__all__ = ["ensure_tables"]


def ensure_tables(
    pool: ConnectionPool[Any], schema: str, projections: Sequence[Projection]
) -> None:
    """Create the live tables of every projection, the tracking and quarantine tables, if
    missing; the tables of a projection an older release laid out otherwise are dropped and
    projected again from the log (projections/layout.py).

    Each statement commits on its own: CREATE INDEX IF NOT EXISTS takes a SHARE lock on its
    table even when the index exists, and one transaction over all of them would hold one
    table's lock while waiting for another's, which a running worker's batch (a rolling
    restart) could hold the other way round. The statements are idempotent; a session-level
    advisory lock keeps two starting processes from interleaving them.
    """
    t = Tables(schema)
    key = lock_key(schema, "ddl")
    with pool.connection() as conn:
        with conn.transaction():
            conn.execute(SQL("SELECT pg_advisory_lock(%s)"), (key,))
        try:
            for statement in [*create_tracking(t), *create_quarantine(t)]:
                with conn.transaction():
                    conn.execute(statement)
            older = layout.stale(conn, projections, t)
            if older:  # laid out by an older release: projected again from the log
                layout.reset(conn, older, t)
            for statement in [s for projection in projections for s in projection.create(t)]:
                with conn.transaction():
                    conn.execute(statement)
        finally:
            try:
                with conn.transaction():
                    conn.execute(SQL("SELECT pg_advisory_unlock(%s)"), (key,))
            except psycopg.Error:
                conn.close()  # the lock goes with the session; the pool drops the connection
