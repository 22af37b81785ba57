"""The ledger's persistence factory: eventsourcing's PostgreSQL one, with the ledger's datastore.

MemoryLedger names it in its env (PERSISTENCE_MODULE). Through the library's extension points
only:

- `LedgerDatastore` overrides PostgresDatastore's public `after_connect_func`, the callback the
  library gives its pool as `configure`: after the library's own (autocommit, the
  idle-in-transaction timeout) it sets, in one more round trip per new connection,
  `lock_timeout` (POSTGRES_LOCK_TIMEOUT: every statement on a ledger connection, saves
  included, gives up on a lock after that long; why that is right for every statement:
  docs/ledger.md) and `application_name` (MEMLEDGER_SESSION_NAME, when the env has it: the
  master keys the process holds, which `memledger keys rotate` reads from pg_stat_activity,
  see `sessions`).
- The datastore's pool is a `pool.LedgerPool` (no dropped connection handed out, deadline-aware
  waits, RECONNECT_TIMEOUT), built by `LedgerDatastore.__init__` with the arguments the
  library's own `__init__` passes to eventsourcing's ConnectionPool. The library builds its
  pool first, unopened (no thread, no connection), and that one is dropped.
- PostgresFactory constructs `PostgresDatastore(...)` itself from the env; `LedgerFactory`
  lets it, then builds a `LedgerDatastore` with the same settings, read from the library
  datastore's and its unopened pool's public attributes (tests/domain/ledger/test_ledger_pool.py
  checks that every public setting carries over).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

from eventsourcing.postgres import PostgresDatastore, PostgresFactory
from eventsourcing.utils import Environment
from psycopg import Connection
from psycopg.rows import DictRow, dict_row
from psycopg.sql import SQL
from psycopg.sql import Literal as SqlLiteral

from domain.ledger.persistence.partitions import DEFAULT_PARTITIONS, PARTITIONS_ENV, partition_count
from domain.ledger.persistence.pool import RECONNECT_TIMEOUT, LedgerPool
from domain.ledger.persistence.sessions import SESSION_NAME_ENV

__all__ = ["LedgerDatastore", "LedgerFactory"]


class LedgerDatastore(PostgresDatastore):
    """PostgresDatastore whose sessions carry the lock timeout and the session name, on a
    LedgerPool."""

    def __init__(  # the library's own signature, plus the session name
        self,
        dbname: str,
        host: str,
        port: str | int,
        user: str,
        password: str,
        *,
        connect_timeout: float = 5.0,
        idle_in_transaction_session_timeout: float = 0,
        pool_size: int = 1,
        max_overflow: int = 0,
        max_waiting: int = 0,
        conn_max_age: float = 60 * 60.0,
        pre_ping: bool = False,
        lock_timeout: int = 0,
        schema: str = "",
        pool_open_timeout: float | None = None,
        get_password_func: Callable[[], str] | None = None,
        single_row_tracking: bool = True,
        originator_id_type: Literal["uuid", "text"] = "uuid",
        enable_db_functions: bool = False,
        session_name: str | None = None,
        partitions: int = DEFAULT_PARTITIONS,
    ) -> None:
        self.session_name = session_name  # read by after_connect_func, which __init__ calls
        self.partitions = partitions
        """The partition count of a schema created through this datastore (persistence/
        partitions.py; an existing schema keeps its own)."""
        super().__init__(
            dbname,
            host,
            port,
            user,
            password,
            connect_timeout=connect_timeout,
            idle_in_transaction_session_timeout=idle_in_transaction_session_timeout,
            pool_size=pool_size,
            max_overflow=max_overflow,
            max_waiting=max_waiting,
            conn_max_age=conn_max_age,
            pre_ping=pre_ping,
            lock_timeout=lock_timeout,
            schema=schema,
            pool_open_timeout=pool_open_timeout,
            get_password_func=get_password_func,
            single_row_tracking=single_row_tracking,
            originator_id_type=originator_id_type,
            enable_db_functions=enable_db_functions,
        )
        # As PostgresDatastore.__init__ builds its pool (eventsourcing 9.5), plus the
        # reconnect timeout; the library's pool, never opened, holds nothing.
        self.pool = LedgerPool(
            get_password_func=get_password_func,
            connection_class=Connection[DictRow],
            kwargs={
                "dbname": dbname,
                "host": host,
                "port": port,
                "user": user,
                "password": password,
                "row_factory": dict_row,
            },
            min_size=pool_size,
            max_size=pool_size + max_overflow,
            open=False,
            configure=self.after_connect_func(),
            timeout=connect_timeout,
            max_waiting=max_waiting,
            max_lifetime=conn_max_age,
            check=LedgerPool.check_connection if pre_ping else None,
            reconnect_timeout=RECONNECT_TIMEOUT,
        )

    def after_connect_func(self) -> Callable[[Connection[Any]], None]:
        """The library's session setup, then the lock timeout and the session name."""
        library_setup = super().after_connect_func()
        settings = [
            SQL("set_config('lock_timeout', {0}, false)").format(
                SqlLiteral(f"{self.lock_timeout}s")
            )
        ]
        if self.session_name is not None:
            settings.append(
                SQL("set_config('application_name', {0}, false)").format(
                    SqlLiteral(self.session_name)
                )
            )
        statement = SQL("SELECT {0}").format(SQL(", ").join(settings))  # one round trip

        # Not a bound method: the pool would hold the datastore (as the library avoids too).
        def after_connect(conn: Connection[Any]) -> None:
            library_setup(conn)
            conn.execute(statement)

        return after_connect


class LedgerFactory(PostgresFactory):
    """PostgresFactory whose datastore is a LedgerDatastore."""

    def __init__(self, env: Environment | dict[str, str] | None) -> None:
        super().__init__(env)
        self.datastore = ledger_datastore(
            self.datastore,
            self.env.get(SESSION_NAME_ENV) or None,
            partition_count(self.env.get(PARTITIONS_ENV)),
        )


def ledger_datastore(
    library: PostgresDatastore, session_name: str | None, partitions: int = DEFAULT_PARTITIONS
) -> LedgerDatastore:
    """A LedgerDatastore with the settings of the (unopened) datastore the library built."""
    pool = library.pool
    if not pool.closed:
        raise RuntimeError("the library's pool is open: it would be left running")
    conninfo = cast(dict[str, Any], pool.kwargs)
    return LedgerDatastore(
        conninfo["dbname"],
        conninfo["host"],
        conninfo["port"],
        conninfo["user"],
        conninfo["password"],
        connect_timeout=pool.timeout,
        idle_in_transaction_session_timeout=library.idle_in_transaction_session_timeout,
        pool_size=pool.min_size,
        max_overflow=pool.max_size - pool.min_size,
        max_waiting=pool.max_waiting,
        conn_max_age=pool.max_lifetime,
        pre_ping=library.pre_ping,
        lock_timeout=library.lock_timeout,
        schema=library.schema,
        pool_open_timeout=library.pool_open_timeout,
        get_password_func=pool.get_password_func,
        single_row_tracking=library.single_row_tracking,
        originator_id_type=cast(Literal["uuid", "text"], library.originator_id_type),
        enable_db_functions=library.enable_db_functions,
        session_name=session_name,
        partitions=partitions,
    )
