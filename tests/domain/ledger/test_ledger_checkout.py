"""A save's connection round (`checkout.with_connection`): errors mapped, connections returned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from eventsourcing import persistence

from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.pool import with_connection


def _datastore(make_ledger: Callable[..., MemoryLedger]) -> Any:
    datastore = make_ledger(pool_size=2).factory.datastore  # type: ignore[attr-defined]
    datastore.pool.wait()
    return datastore


def _pid(conn: psycopg.Connection[Any]) -> int:
    return int(conn.info.backend_pid)


def test_the_connection_goes_back_to_the_pool_after_the_work(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    datastore = _datastore(make_ledger)
    idle = datastore.pool.get_stats()["pool_available"]
    first = with_connection(datastore, _pid)
    assert datastore.pool.get_stats()["pool_available"] == idle
    # Returned, and handed out again once the others have been (psycopg_pool's FIFO order).
    assert first in [with_connection(datastore, _pid) for _ in range(idle)]
    assert datastore.pool.get_stats()["pool_available"] == idle


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("SELECT 1/0", persistence.DataError),
        ("SELECT * FROM no_such_table", persistence.ProgrammingError),
        ("SET lock_timeout = 'soon'", persistence.DataError),
    ],
)
def test_psycopg_errors_are_raised_as_the_library_maps_them(
    make_ledger: Callable[..., MemoryLedger], statement: str, expected: type[Exception]
) -> None:
    datastore = _datastore(make_ledger)
    with pytest.raises(expected) as raised:
        with_connection(datastore, lambda conn: conn.execute(statement))
    assert isinstance(raised.value.__cause__, psycopg.Error)
    # The connection came back usable, in no transaction.
    assert with_connection(datastore, lambda conn: conn.execute("SELECT 2").fetchone()) == {
        "?column?": 2
    }


def test_a_connection_broken_during_the_work_is_discarded_not_reused(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    datastore = _datastore(make_ledger)
    killed: list[int] = []

    def break_it(conn: psycopg.Connection[Any]) -> int:
        pid = _pid(conn)
        killed.append(pid)
        with psycopg.connect(conn.info.dsn, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        conn.execute("SELECT 1")  # the server is gone: OperationalError
        return pid

    with pytest.raises(persistence.OperationalError):
        with_connection(datastore, break_it)
    assert with_connection(datastore, _pid) not in killed


def test_a_closed_pool_is_opened_by_the_library_path(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    datastore = make_ledger(pool_size=2).factory.datastore  # type: ignore[attr-defined]
    datastore.pool.close()
    datastore.pool = type(datastore.pool)(  # a fresh, unopened pool, as the library builds it
        kwargs=datastore.pool.kwargs, min_size=1, open=False
    )
    assert datastore.pool.closed
    assert with_connection(datastore, lambda conn: conn.execute("SELECT 3").fetchone())
    assert not datastore.pool.closed


def test_a_pool_timeout_is_raised_as_the_library_s_operational_error(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    # The library's get_connection raises a PoolTimeout (no connection free in time) as its
    # OperationalError: the recorder's retry runs again on it, and the ledger answers
    # LedgerUnavailable. The getconn of with_connection must be mapped the same way.
    datastore = _datastore(make_ledger)
    pool = datastore.pool
    held = [pool.getconn() for _ in range(pool.max_size)]
    pool.timeout = 0.2
    try:
        with pytest.raises(persistence.OperationalError) as raised:
            with_connection(datastore, _pid)
        assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    finally:
        for conn in held:
            pool.putconn(conn)
