"""The tables projections need, made at start-up, each statement under a lock timeout.

A statement waiting for a lock makes every later request for that table queue behind it, and
with no timeout it waits as long as whoever holds the table (a `LOCK TABLE` left open, a long
migration). So each statement here runs in a transaction of its own with `SET LOCAL
lock_timeout` (MEMLEDGER_LOCK_TIMEOUT, 5 s by default):

- a missing table is created (CREATE TABLE IF NOT EXISTS takes no lock on a table that
  exists), the tracking of the release before partitions translated (projections/upgrade.py),
  and the tables of a layout an older release made are dropped (projections/layout.py):
  all are needed, so a lock timeout is retried a few times, then start-up fails, saying why;
- what is maintenance only (an index, a table's autovacuum options, an index dropped) is
  skipped with a warning when its table stays locked, and done at the next start: the other
  statements of the same projection are skipped too (they would wait on the same tables).

In a new schema (none of the projections' tables exists) the projections' statements run in
one transaction instead, sent as one pipeline: nobody can hold a lock on a table that does not
exist yet. Then the tables a killed rebuild left behind are dropped
(projections/rebuild/leftovers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.sql import SQL, Composed
from psycopg_pool import ConnectionPool

from projections import layout, repartition, upgrade
from projections.base import Projection
from projections.quarantine import create_quarantine
from projections.rebuild.leftovers import drop_leftovers
from projections.tracking import Tables, create_tracking, lock_key, set_lock_timeout

__all__ = ["ATTEMPTS", "StartupLocked", "ensure_tables"]

ATTEMPTS = 3
"""Tries of a needed statement whose table stays locked, before start-up gives up."""
_log = logging.getLogger(__name__)


class StartupLocked(RuntimeError):
    """A table start-up needs to change stayed locked by another session."""


def ensure_tables(
    pool: ConnectionPool[Any],
    schema: str,
    projections: Sequence[Projection],
    *,
    lock_timeout: float = 5.0,
    partition_of: Callable[[str], int] | None = None,
) -> list[str]:
    """Create the live tables of every projection, the tracking and quarantine tables, if
    missing; the tables of a projection an older release laid out otherwise are dropped and
    projected again from the log (projections/layout.py); a killed rebuild's tables dropped.

    Each statement commits on its own: CREATE INDEX IF NOT EXISTS takes a SHARE lock on its
    table even when the index exists, and one transaction over all of them would hold one
    table's lock while waiting for another's, which a running worker's batch (a rolling
    restart) could hold the other way round. The statements are idempotent; a session-level
    advisory lock keeps two starting processes from interleaving them.

    The tables of the release before partitioned views get their `partition` column and
    key in place (projections/repartition.py): `partition_of` is the ledger's partition of a
    user (`MemoryLedger.partition`), needed when such tables hold rows.

    Returns the projections whose rows' positions the upgrade from the release before
    partitions rewrote ([] but at that first start: projections/upgrade.py).
    """
    t = Tables(schema)
    key = lock_key(schema, "ddl")
    with pool.connection() as conn:
        with conn.transaction():  # the other process's statements are bounded: wait for it
            conn.execute(SQL("SELECT set_config('lock_timeout', '0', true)"))
            conn.execute(SQL("SELECT pg_advisory_lock(%s)"), (key,))
        try:
            for statement in [*create_tracking(t), *create_quarantine(t)]:
                _needed(conn, lock_timeout, "tracking", lambda s=statement: conn.execute(s))
            # Tracked before the ledger had partitions: translated, once (projections/upgrade.py).
            again: list[str] = []
            _needed(conn, lock_timeout, "upgrade", lambda: again.extend(upgrade.translate(conn, t)))
            # Views of the release before partitioned views: given their partition, in place.
            logical = repartition.logical_tables(n for p in projections for n in p.tables)
            _needed(
                conn,
                lock_timeout,
                "partitions",
                lambda: repartition.add_partitions(conn, t, logical, partition_of),
            )
            older = layout.stale(conn, projections, t)
            if older:  # laid out by an older release: projected again from the log
                names = ", ".join(p.name for p in older)
                _needed(conn, lock_timeout, names, lambda: layout.reset(conn, older, t))
            if _none_exist(conn, t, projections):  # a new schema: one transaction
                _needed(conn, lock_timeout, "tables", lambda: _create_all(conn, projections, t))
            else:
                for projection in projections:
                    _create(conn, projection, t, lock_timeout)
            drop_leftovers(conn, schema, lock_timeout)
            return again
        finally:
            try:
                with conn.transaction():
                    conn.execute(SQL("SELECT pg_advisory_unlock(%s)"), (key,))
            except psycopg.Error:
                conn.close()  # the lock goes with the session; the pool drops the connection


def _none_exist(conn: Connection[Any], t: Tables, projections: Sequence[Projection]) -> bool:
    """True when no table of these projections exists yet (a new schema)."""
    names = [t[logical].as_string(conn) for p in projections for logical in p.tables]
    with conn.transaction():  # no transaction left open on a connection not in autocommit
        row = conn.execute(
            SQL("SELECT bool_and(to_regclass(name) IS NULL) FROM unnest(%s::text[]) AS name"),
            (names,),
        ).fetchone()
    return bool(row and row[0])


def _create_all(conn: Connection[Any], projections: Sequence[Projection], t: Tables) -> None:
    """Every projection's DDL, sent as one pipeline in the caller's transaction: no other
    session can hold a lock on tables that do not exist yet (and other starting processes wait
    on the DDL lock), so there is no lock order to keep; one commit instead of one per
    statement (start-up of a new schema, e.g. each test's: 57 -> 25 ms here)."""
    with conn.pipeline():
        for projection in projections:
            for statement in projection.create(t):
                conn.execute(statement)


def _create(conn: Connection[Any], projection: Projection, t: Tables, lock_timeout: float) -> None:
    """The projection's DDL: its tables needed, the rest skipped once a table stays locked."""
    locked = False
    for statement in projection.create(t):
        if _creates_table(conn, statement):
            _needed(conn, lock_timeout, projection.name, lambda s=statement: conn.execute(s))
        elif not locked:
            try:
                with conn.transaction():
                    set_lock_timeout(conn, lock_timeout)
                    conn.execute(statement)
            except psycopg.errors.LockNotAvailable:
                locked = True
                _log.warning(
                    "projection %s: a table stayed locked for %.1fs; its maintenance"
                    " statements (indexes, autovacuum options) are skipped until the next start",
                    projection.name,
                    lock_timeout,
                )


def _creates_table(conn: Connection[Any], statement: Composed) -> bool:
    return statement.as_string(conn).startswith("CREATE TABLE")


def _needed(conn: Connection[Any], lock_timeout: float, what: str, run: Any) -> None:
    """Run `run()` in a transaction under the lock timeout; retried, then StartupLocked."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with conn.transaction():
                set_lock_timeout(conn, lock_timeout)
                run()
            return
        except psycopg.errors.LockNotAvailable:
            _log.warning(
                "start-up: %s: a table stayed locked for %.1fs (attempt %s of %s)",
                what,
                lock_timeout,
                attempt,
                ATTEMPTS,
            )
    raise StartupLocked(
        f"{what}: its tables stayed locked by another session ({ATTEMPTS} x {lock_timeout}s);"
        " end that session (pg_stat_activity, pg_locks) and start again"
    )
