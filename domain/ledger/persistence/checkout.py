"""A save's connection round, taken straight from the pool: getconn, the work, putconn.

`with_connection(datastore, work)` runs `work(conn)` on a pooled connection and raises psycopg
errors as the library's persistence errors (mapped as `PostgresDatastore.get_connection`
maps them); a broken or closed connection is discarded by the pool. While the pool is not
open (or closed), the library's own `get_connection` runs, which opens it. Why the library's
path is skipped otherwise: docs/ledger.md. Inside `with pinned(datastore) as conn:`, every
`with_connection` of this thread runs on `conn` (a session holding a lock writes itself).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import psycopg
from eventsourcing import persistence
from eventsourcing.postgres import PostgresDatastore

__all__ = ["pinned", "with_connection"]

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
