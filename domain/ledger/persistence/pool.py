"""Connection pools that hand out the connection returned last (LIFO), not the oldest.

`use_lifo(pool)` switches the pool eventsourcing's datastore built (LedgerFactory calls it);
`LifoReadPool` is psycopg_pool's ConnectionPool, LIFO, for the API's reads. Why, and what it
measured: docs/ledger.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import psycopg
import psycopg_pool
from eventsourcing import persistence
from eventsourcing.postgres import ConnectionPool, PostgresDatastore
from psycopg_pool import PoolTimeout, TooManyRequests

__all__ = ["LifoConnectionPool", "LifoReadPool", "use_lifo", "with_connection"]


def _get_ready_lifo(self: Any, timeout: float | None) -> Any:
    # psycopg_pool's own `_get_ready_connection` (3.2, 3.3) with pop() instead of popleft();
    # it runs with the pool's lock held. tests/domain/ledger/test_ledger_pool.py checks it.
    if timeout is not None and timeout <= 0.0:
        raise PoolTimeout()
    conn = None
    if self._pool:
        conn = self._pool.pop()
        if len(self._pool) < self._nconns_min:
            self._nconns_min = len(self._pool)
    elif self.max_waiting and len(self._waiting) >= self.max_waiting:
        self._stats[self._REQUESTS_ERRORS] += 1
        raise TooManyRequests(
            f"the pool {self.name!r} has already {len(self._waiting)} requests waiting"
        )
    return conn


class LifoConnectionPool(ConnectionPool[Any]):
    """eventsourcing's ConnectionPool, taking idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo


class LifoReadPool(psycopg_pool.ConnectionPool[Any]):
    """psycopg_pool's ConnectionPool, taking idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo


def use_lifo(pool: ConnectionPool[Any]) -> None:
    """Make the pool the eventsourcing datastore built hand out its connections LIFO.

    The datastore constructs its pool itself, so the class of that pool is switched; the
    subclass adds no state, so this is safe whether the pool is open or not.
    """
    if type(pool) is ConnectionPool:
        pool.__class__ = LifoConnectionPool


T = TypeVar("T")

# In the order of the library's own mapping (PostgresDatastore.get_connection).
_MAPPING: Final[tuple[tuple[type[psycopg.Error], type[persistence.PersistenceError]], ...]] = (
    (psycopg.InterfaceError, persistence.InterfaceError),
    (psycopg.OperationalError, persistence.OperationalError),
    (psycopg.DataError, persistence.DataError),
    (psycopg.IntegrityError, persistence.IntegrityError),
    (psycopg.InternalError, persistence.InternalError),
    (psycopg.ProgrammingError, persistence.ProgrammingError),
    (psycopg.NotSupportedError, persistence.NotSupportedError),
    (psycopg.DatabaseError, persistence.DatabaseError),
)


def with_connection(
    datastore: PostgresDatastore, work: Callable[[psycopg.Connection[Any]], T]
) -> T:
    """`work` run on a pooled connection; psycopg errors raised as persistence errors."""
    pool = datastore.pool
    if pool.closed:
        with datastore.get_connection() as conn:
            return work(conn)
    try:
        # A PoolTimeout (or TooManyRequests) is a psycopg OperationalError: mapped like the
        # library's, so the recorder's retry meets it and the ledger answers LedgerUnavailable.
        conn = pool.getconn()
    except psycopg.Error as e:
        raise persistence_error(e) from e
    try:
        return work(conn)
    except psycopg.Error as e:
        raise persistence_error(e) from e
    finally:
        pool.putconn(conn)


def persistence_error(e: psycopg.Error) -> persistence.PersistenceError:
    """The library's persistence error for a psycopg error, with the same message."""
    for source, target in _MAPPING:
        if isinstance(e, source):
            return target(str(e))
    return persistence.PersistenceError(str(e))
