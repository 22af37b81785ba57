"""The ledger's persistence factory: eventsourcing's PostgreSQL one, with the ledger's pool.

MemoryLedger names it in its env (PERSISTENCE_MODULE). Its pool, built by the library unopened,
is made LIFO (see `pool`) and given a configure callback that, once per connection, also sets
for the session:

- `lock_timeout` (POSTGRES_LOCK_TIMEOUT): every statement on a ledger connection, saves
  included, gives up on a lock after that long. Why a session-wide timeout is right for every
  statement: docs/ledger.md.
- `application_name` (MEMLEDGER_SESSION_NAME, when the env has it): the master keys the
  process holds, which `memledger keys rotate` reads from pg_stat_activity (see `sessions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.postgres import PostgresDatastore, PostgresFactory
from eventsourcing.utils import Environment
from psycopg import Connection
from psycopg.sql import SQL, Literal

from domain.ledger.persistence.pool import use_lifo
from domain.ledger.persistence.sessions import SESSION_NAME_ENV

__all__ = ["LedgerFactory"]


class LedgerFactory(PostgresFactory):
    """PostgresFactory whose pool is LIFO and sets the lock timeout and the session name of
    each session."""

    def __init__(self, env: Environment | dict[str, str] | None) -> None:
        super().__init__(env)
        datastore = self.datastore
        use_lifo(datastore.pool)
        # Before the pool is opened (it is built with open=False), so every connection,
        # the first ones included, goes through the callback.
        session_name = self.env.get(SESSION_NAME_ENV) or None
        datastore.pool._configure = _configure_session(datastore, session_name)


def _configure_session(
    datastore: PostgresDatastore, session_name: str | None
) -> Callable[[Connection[Any]], None]:
    library_configure = datastore.after_connect_func()  # autocommit, idle-in-transaction timeout
    settings = [
        SQL("set_config('lock_timeout', {0}, false)").format(Literal(f"{datastore.lock_timeout}s"))
    ]
    if session_name is not None:
        settings.append(
            SQL("set_config('application_name', {0}, false)").format(Literal(session_name))
        )
    # One round trip for both settings.
    statement = SQL("SELECT {0}").format(SQL(", ").join(settings))

    def configure(conn: Connection[Any]) -> None:
        library_configure(conn)
        conn.execute(statement)

    return configure
