"""What kind of failure an error of applying (or decoding) ledger events is.

- `transient`: the database or the network is unwell (connection lost, serialization
  failure, deadlock, lock or statement timeout, shutdown, out of resources), also when it
  surfaces through the ledger (fetching a data key: the library's OperationalError, or
  LedgerUnavailable). Raised: the batch is retried whole later; nothing is quarantined or
  skipped.
- `event`: this event cannot be applied (a data exception or integrity violation, or any
  exception of the projection's own code). Quarantined (projections/quarantine.py).
- `broken`: the projection itself cannot run (a missing table or column, an internal error).
  Raised: it would fail every event alike, so none is quarantined.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import psycopg
from eventsourcing.persistence import DataError as LibraryDataError
from eventsourcing.persistence import IntegrityError as LibraryIntegrityError
from eventsourcing.persistence import InterfaceError as LibraryInterfaceError
from eventsourcing.persistence import OperationalError as LibraryOperationalError
from eventsourcing.persistence import PersistenceError
from psycopg import Connection

from domain.errors import LedgerUnavailable

__all__ = ["Failure", "failure"]

# SQLSTATE classes (the first two characters) of each kind of failure; psycopg maps most
# transient ones to OperationalError, but classifying the code too covers the rest.
_TRANSIENT_CLASSES: Final = frozenset({"08", "40", "53", "55", "57", "58"})
_EVENT_CLASSES: Final = frozenset({"22", "23"})

Failure = Literal["transient", "event", "broken"]


def failure(error: BaseException, conn: Connection[Any] | None = None) -> Failure:
    """What kind of failure `error` is (see the module docstring)."""
    if conn is not None and (conn.closed or conn.broken):
        return "transient"
    if isinstance(error, LedgerUnavailable):  # e.g. a data key that could not be fetched
        return "transient"
    if isinstance(error, PersistenceError):  # the ledger's errors (fetching data keys)
        if isinstance(error.__cause__, psycopg.Error):
            return failure(error.__cause__)
        if isinstance(error, LibraryOperationalError | LibraryInterfaceError):
            return "transient"
        return "event" if isinstance(error, LibraryDataError | LibraryIntegrityError) else "broken"
    if isinstance(error, psycopg.Error):
        code = error.sqlstate or ""
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return "transient"
        if code[:2] in _TRANSIENT_CLASSES:
            return "transient"
        if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
            return "event"
        return "event" if code[:2] in _EVENT_CLASSES else "broken"
    if isinstance(error, OSError | MemoryError):  # a network call, or this process, unwell
        return "transient"
    return "event"
