"""The ledger's persistence factory: eventsourcing's PostgreSQL one, with the ledger's pool.

MemoryLedger names it in its env (PERSISTENCE_MODULE). Its pool, built by the library unopened,
is made LIFO (see `pool`) and given a configure callback that also sets `lock_timeout` for the
session, once per connection (POSTGRES_LOCK_TIMEOUT): every statement on a ledger connection,
saves included, gives up on a lock after that long. Why a session-wide timeout is right for
every statement: docs/ledger.md.
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
