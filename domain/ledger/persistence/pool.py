"""Connection pools that never hand out a connection the server has closed, and wait for one no
longer than the caller's deadline (domain/context.py); public psycopg_pool API only.

`LedgerPool` is eventsourcing's ConnectionPool (the ledger's datastore builds it: factory.py);
`ReadPool` is psycopg_pool's, for projections and their workers; `RequestReadPool` is the API's
read pool, on which an outage raises LedgerUnavailable. Outage behaviour: docs/operations.md.

Both override only the public `getconn` (which `connection()` calls too): a connection the
server closed while idle (a restart, an admin shutdown) is closed and given back with the
public `putconn`, which discards it and opens a replacement, and the next idle one is taken.
Not psycopg_pool's `check=` callback: after every connection that fails its check the pool
sleeps a back-off (1 s, 2 s, 4 s, ...) before taking the next, so after a restart with N dead
idle connections a request waited 2^N - 1 seconds (measured: 3 s for 3, 14 s for 5).
Idle connections are handed out in psycopg_pool's own order (first in, first out): the LIFO
order of before needed its private `_get_ready_connection` (docs/ledger.md, "Pools").

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

from domain import context
from domain.errors import LedgerUnavailable

__all__ = [
    "RECONNECT_TIMEOUT",
    "LedgerPool",
    "ReadPool",
    "RequestReadPool",
    "pinned",
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


def _deadline_timeout(timeout: float | None, default: float) -> float | None:
    """The wait for a connection, cut to the deadline's time left (None: the pool's own)."""
    left = context.remaining()
    if left is None:
        return timeout
    if left <= 0.0:
        raise LedgerUnavailable("the request's deadline passed while waiting for the database")
    return min(default if timeout is None else timeout, left)


C = TypeVar("C", bound=psycopg.Connection[Any])


def _live_connection(
    getconn: Callable[[float | None], C],
    putconn: Callable[[C], None],
    timeout: float | None,
    default: float,
) -> C:
    """A connection from `getconn` that the server has not closed, within the deadline.

    A dropped one is closed and returned: `putconn` discards a closed connection and has the
    pool open a new one (psycopg_pool's documented handling of a broken connection).
    """
    while True:
        conn = getconn(_deadline_timeout(timeout, default))
        if not _dropped(conn):
            return conn
        conn.close()
        putconn(conn)


class LedgerPool(ConnectionPool[Any]):
    """eventsourcing's ConnectionPool, handing out live connections within the deadline."""

    def getconn(self, timeout: float | None = None) -> Any:
        """A live connection, waited for no longer than the caller's deadline allows."""
        return _live_connection(super().getconn, self.putconn, timeout, self.timeout)


class ReadPool(psycopg_pool.ConnectionPool[Any]):
    """psycopg_pool's ConnectionPool, handing out live connections within the deadline."""

    def getconn(self, timeout: float | None = None) -> Any:
        """A live connection, waited for no longer than the caller's deadline allows."""
        return _live_connection(super().getconn, self.putconn, timeout, self.timeout)


class RequestReadPool(ReadPool):
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
