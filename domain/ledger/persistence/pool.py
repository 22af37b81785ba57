"""Connection pools that hand out the connection returned last (LIFO), not the oldest, and
never one the server has closed; within a caller's deadline (domain/context.py).

`use_lifo(pool)` switches the pool eventsourcing's datastore built (LedgerFactory calls it);
`LifoReadPool` is psycopg_pool's ConnectionPool, LIFO, for projections and their workers;
`RequestReadPool` is the API's read pool, on which an outage raises LedgerUnavailable. Why
LIFO, and what it measured: docs/ledger.md. Outage behaviour: docs/operations.md.

While a deadline is set (`domain.context.within`), a pool waits for a connection no longer
than the time left, and once none is left raises LedgerUnavailable at once: it is not an
OperationalError, so the library's retries stop instead of trying again after the deadline.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import psycopg
import psycopg_pool
from eventsourcing import persistence
from eventsourcing.postgres import ConnectionPool, PostgresDatastore
from psycopg_pool import PoolTimeout, TooManyRequests
from psycopg_pool.pool import AddConnection

from domain import context
from domain.errors import LedgerUnavailable

__all__ = [
    "RECONNECT_TIMEOUT",
    "LifoConnectionPool",
    "LifoReadPool",
    "RequestReadPool",
    "pinned",
    "use_lifo",
    "with_connection",
]

RECONNECT_TIMEOUT: Final = 2.0
"""Seconds a pool keeps retrying a failed connection attempt before it gives up (psycopg_pool's
default is 5 minutes). While the server is down, attempts back off (1 s, 2 s, ...); giving up
early means the next request after the server is back connects at once, not at the next step
of that back-off. The pool connects again whenever a caller waits for a connection."""

_READABLE: Final = select.POLLIN | select.POLLERR | select.POLLHUP


def _dropped(conn: psycopg.Connection[Any]) -> bool:
    """True when an idle connection was closed by the server (a restart, an admin shutdown).

    An idle connection receives nothing unless the server ends it (the pools' connections
    never LISTEN), so a readable socket means it was dropped. One poll(2), no round trip.
    """
    if conn.closed:
        return True
    try:
        fd = conn.pgconn.socket
    except psycopg.OperationalError:
        return True
    poller = select.poll()
    poller.register(fd, _READABLE)
    return bool(poller.poll(0))


def _get_ready_lifo(self: Any, timeout: float | None) -> Any:
    # psycopg_pool's own `_get_ready_connection` (3.2, 3.3) with pop() instead of popleft(),
    # and a dropped connection replaced (as psycopg_pool replaces a broken one returned to it)
    # instead of handed out; it runs with the pool's lock held.
    # tests/domain/ledger/test_ledger_pool.py checks it.
    if timeout is not None and timeout <= 0.0:
        raise PoolTimeout()
    conn = None
    while self._pool:
        conn = self._pool.pop()
        if len(self._pool) < self._nconns_min:
            self._nconns_min = len(self._pool)
        if not _dropped(conn):
            return conn
        self._stats[self._CONNECTIONS_LOST] += 1
        conn.close()
        self.run_task(AddConnection(self))
        conn = None
    if self.max_waiting and len(self._waiting) >= self.max_waiting:
        self._stats[self._REQUESTS_ERRORS] += 1
        raise TooManyRequests(
            f"the pool {self.name!r} has already {len(self._waiting)} requests waiting"
        )
    return conn


def _deadline_timeout(timeout: float | None, default: float) -> float | None:
    """The wait for a connection, cut to the deadline's time left (None: the pool's own)."""
    left = context.remaining()
    if left is None:
        return timeout
    if left <= 0.0:
        raise LedgerUnavailable("the request's deadline passed while waiting for the database")
    return min(default if timeout is None else timeout, left)


class LifoConnectionPool(ConnectionPool[Any]):
    """eventsourcing's ConnectionPool, taking live idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo

    def getconn(self, timeout: float | None = None) -> Any:
        """A connection, waited for no longer than the caller's deadline allows."""
        return super().getconn(_deadline_timeout(timeout, self.timeout))


class LifoReadPool(psycopg_pool.ConnectionPool[Any]):
    """psycopg_pool's ConnectionPool, taking live idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo

    def getconn(self, timeout: float | None = None) -> Any:
        """A connection, waited for no longer than the caller's deadline allows."""
        return super().getconn(_deadline_timeout(timeout, self.timeout))


class RequestReadPool(LifoReadPool):
    """The API's read pool: a database outage inside `connection()` raises LedgerUnavailable.

    Outages are psycopg's OperationalError (server gone, AdminShutdown, a statement timeout,
    PoolTimeout) and InterfaceError (a closed connection); other errors are bugs and pass.
    """

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Any]:
        """A pooled connection for one block, returned to the pool afterwards."""
        try:
            with super().connection(timeout) as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            raise LedgerUnavailable(f"database unavailable: {type(error).__name__}") from error


def use_lifo(pool: ConnectionPool[Any]) -> None:
    """Make the pool the eventsourcing datastore built hand out its connections LIFO.

    The datastore constructs its pool itself, so the class of that pool is switched; the
    subclass adds no state, so this is safe whether the pool is open or not. Its failed
    connection attempts give up after RECONNECT_TIMEOUT.
    """
    if type(pool) is ConnectionPool:
        pool.__class__ = LifoConnectionPool
    pool.reconnect_timeout = RECONNECT_TIMEOUT


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
    conn = getattr(_pins, "conns", {}).get(id(datastore))
    if conn is not None:
        try:
            return work(conn)
        except psycopg.Error as e:
            raise persistence_error(e) from e
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


_pins = threading.local()


@contextmanager
def pinned(datastore: PostgresDatastore) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection that this thread's `with_connection` calls use until the exit."""
    conns: dict[int, psycopg.Connection[Any]] = _pins.__dict__.setdefault("conns", {})
    if id(datastore) in conns:
        raise RuntimeError("a connection is pinned already")
    pool = datastore.pool
    if pool.closed:
        pool.open()
    try:
        conn = pool.getconn()
    except psycopg.Error as e:
        raise persistence_error(e) from e
    conns[id(datastore)] = conn
    try:
        yield conn
    finally:
        del conns[id(datastore)]
        pool.putconn(conn)


def persistence_error(e: psycopg.Error) -> persistence.PersistenceError:
    """The library's persistence error for a psycopg error, with the same message."""
    for source, target in _MAPPING:
        if isinstance(e, source):
            return target(str(e))
    return persistence.PersistenceError(str(e))
