"""The partition the current operation's aggregate reads belong to: a routing hint.

eventsourcing's repository loads an aggregate by id alone (`select_events(originator_id)`),
which on Citus runs on every shard: the events table is distributed by partition, and a
statement without the partition in its WHERE cannot be routed. The ledger knows the partition
whenever it loads a user's aggregate (the user's), so it loads inside `within(partition)` and
`LedgerRecorder.select_events` adds `partition = %s`: the load, like the save after it, runs on
the one shard holding the partition (tests/citus/test_routing.py reads the plans). Naming the
wrong partition finds nothing, as another user's aggregate must (NotFound). A context variable,
so each thread and task has its own hint; outside `within`, loads read every partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed

__all__ = ["current", "select_events_in", "within"]

_HINT: ContextVar[int | None] = ContextVar("memledger_partition_hint", default=None)


@contextmanager
def within(partition: int) -> Iterator[None]:
    """Aggregate loads in this block read this partition only."""
    token = _HINT.set(partition)
    try:
        yield
    finally:
        _HINT.reset(token)


def current() -> int | None:
    """The partition of the enclosing `within`, None outside one."""
    return _HINT.get()


@retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's
def select_events_in(
    recorder: Any,
    partition: int,
    originator_id: UUID | str,
    *,
    gt: int | None,
    lte: int | None,
    desc: bool,
    limit: int | None,
) -> list[StoredEvent]:
    """The library's `select_events`, in one partition (the same statement with
    `AND partition = %s`, through the recorder's public statement and datastore), retried on a
    dropped connection as the library's own is."""
    statement: Composed = recorder.select_events_statement + SQL(" AND partition = %s")
    params: list[Any] = [originator_id, partition]
    if gt is not None:
        params.append(gt)
        statement += SQL(" AND originator_version > %s")
    if lte is not None:
        params.append(lte)
        statement += SQL(" AND originator_version <= %s")
    statement += SQL(
        " ORDER BY originator_version DESC" if desc else " ORDER BY originator_version"
    )
    if limit is not None:
        params.append(limit)
        statement += SQL(" LIMIT %s")
    with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(statement, params, prepare=True)
        return [
            StoredEvent(
                originator_id=row["originator_id"],
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=bytes(row["state"]),
            )
            for row in curs.fetchall()
        ]
