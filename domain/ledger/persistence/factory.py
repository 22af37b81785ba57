"""The ledger's persistence factory: eventsourcing's PostgreSQL one, with the ledger's pool.

Its pool, built by the library unopened, is made LIFO (see `pool`) and given a configure
callback that also sets `lock_timeout` for the session, once per connection, so a save no
longer sends `SET LOCAL lock_timeout` in every transaction (one statement of eight).

A session-wide lock timeout is right for every statement that runs on these connections:
- saves (`LedgerRecorder.insert_events`): the data-key, claim and fingerprint writes, which
  can wait on a concurrent transaction holding the same key or row, and LOCK TABLE on the
  events table; a wait past the timeout raises LockNotAvailable, an OperationalError that the
  recorder's retry runs again (before, only the LOCK TABLE had the timeout);
- forget and erase (same path: deletes in the save's transaction);
- reads and tailing readers (event selects, key look-ups, claims): plain SELECTs, which wait
  only behind DDL's ACCESS EXCLUSIVE lock, and are retried the same way;
- key rotation: SELECT ... FOR UPDATE SKIP LOCKED never waits on rows; its UPDATEs touch only
  the rows it locked;
- table creation at start-up, which the library already runs under the same timeout.
The idle-in-transaction timeout is already set per session by the library's own callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.postgres import PostgresDatastore, PostgresFactory
from eventsourcing.utils import Environment
from psycopg import Connection
from psycopg.sql import SQL

from domain.ledger.persistence.pool import use_lifo

__all__ = ["LedgerFactory"]


class LedgerFactory(PostgresFactory):
    """PostgresFactory whose pool is LIFO and sets the lock timeout for each session."""

    def __init__(self, env: Environment | dict[str, str] | None) -> None:
        super().__init__(env)
        datastore = self.datastore
        use_lifo(datastore.pool)
        # Before the pool is opened (it is built with open=False), so every connection,
        # the first ones included, goes through the callback.
        datastore.pool._configure = _with_lock_timeout(datastore)


def _with_lock_timeout(datastore: PostgresDatastore) -> Callable[[Connection[Any]], None]:
    library_configure = datastore.after_connect_func()  # autocommit, idle-in-transaction timeout
    statement = SQL("SET lock_timeout = '{0}s'").format(datastore.lock_timeout)

    def configure(conn: Connection[Any]) -> None:
        library_configure(conn)
        conn.execute(statement)

    return configure
