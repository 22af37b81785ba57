"""Pools and retries under outages: dropped connections are replaced, never handed out, and
every wait and retry ends within the caller's deadline (domain/context.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import OperationalError
from psycopg_pool import PoolTimeout

from api.bootstrap import build_pool, build_read_pool
from api.settings import Settings
from domain import context
from domain.context import on_outage, retrying
from domain.errors import LedgerUnavailable
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.pool import RECONNECT_TIMEOUT, ReadPool


def _terminate(database_url: str, pids: list[int]) -> None:
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
    time.sleep(0.2)  # the FATAL message and the close reach the clients' sockets


def _idle_pids(pool: Any, count: int) -> list[int]:
    conns = [pool.getconn() for _ in range(count)]
    try:
        return [int(conn.info.backend_pid) for conn in conns]
    finally:
        for conn in conns:
            pool.putconn(conn)


def _checkouts_after_the_servers_closed_them(pool: Any, database_url: str, idle: int) -> None:
    # As after a PostgreSQL restart: every idle connection of the pool was ended by the server.
    pool.wait()
    pids = _idle_pids(pool, idle)
    _terminate(database_url, pids)
    started = time.monotonic()
    for _ in range(idle + 1):  # each dead one would come first (psycopg_pool's FIFO order)
        with pool.connection() as conn:
            conn.execute("SELECT 1")  # live: no OperationalError
            assert conn.info.backend_pid not in pids
    # No check-and-back-off round per dead connection (psycopg_pool's `check=` sleeps 1 s,
    # 2 s, 4 s ... after each connection that fails it).
    assert time.monotonic() - started < 2.0
    assert pool.get_stats()["returns_bad"] >= idle  # closed and given back: replaced


def test_connections_the_server_closed_are_replaced_not_handed_out(
    make_ledger: Callable[..., MemoryLedger], database_url: str
) -> None:
    pool: Any = make_ledger(pool_size=4).factory.datastore.pool  # type: ignore[attr-defined]
    assert pool.reconnect_timeout == RECONNECT_TIMEOUT
    _checkouts_after_the_servers_closed_them(pool, database_url, 4)


@pytest.mark.parametrize("build", [build_pool, build_read_pool])
def test_the_read_pools_replace_connections_the_server_closed_too(
    build: Callable[[Settings, str], Any], database_url: str, pg_schema: str
) -> None:
    pool = build(Settings(database_url=database_url, db_schema=pg_schema), database_url)
    try:
        pool.resize(3, 3)
        _checkouts_after_the_servers_closed_them(pool, database_url, 3)
    finally:
        pool.close()


def test_the_api_read_pool_has_a_statement_timeout_and_raises_outages_as_unavailable(
    database_url: str, pg_schema: str
) -> None:
    settings = Settings(database_url=database_url, db_schema=pg_schema, statement_timeout=0.2)
    pool = build_read_pool(settings, database_url)
    try:
        with pool.connection() as conn:
            assert conn.execute("SHOW statement_timeout").fetchone() == ("200ms",)
        with pytest.raises(LedgerUnavailable), pool.connection() as conn:
            conn.execute("SELECT pg_sleep(2)")  # QueryCanceled: an OperationalError
        with pytest.raises(psycopg.errors.UndefinedTable), pool.connection() as conn:
            conn.execute("SELECT * FROM no_such_table")  # a bug, not an outage: unchanged
    finally:
        pool.close()


def test_a_pool_waits_no_longer_than_the_deadline_and_not_at_all_past_it(
    database_url: str,
) -> None:
    pool: ReadPool = ReadPool(
        database_url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True, timeout=30
    )
    try:
        with pool.connection():  # the only connection is taken
            started = time.monotonic()
            with context.within(0.3), pytest.raises(PoolTimeout):
                pool.getconn()
            assert time.monotonic() - started < 1.0
            with context.within(0.0), pytest.raises(LedgerUnavailable):
                pool.getconn()  # not an OperationalError: the library's retries stop here
    finally:
        pool.close()


def test_retries_on_a_dropped_connection_stop_before_the_deadline() -> None:
    calls: list[float] = []

    @on_outage
    def always_down() -> None:
        calls.append(time.monotonic())
        raise OperationalError("server closed the connection unexpectedly")

    started = time.monotonic()
    with context.within(0.5), pytest.raises(OperationalError):
        always_down()
    assert time.monotonic() - started < 0.6
    assert 1 < len(calls) < 10


def test_an_outage_in_a_command_is_ledger_unavailable() -> None:
    def body() -> None:
        raise OperationalError("the database system is shutting down")

    with pytest.raises(LedgerUnavailable):
        retrying(body)


def test_deadlines_nest_and_end_with_their_block() -> None:
    assert context.remaining() is None and not context.expired()
    with context.within(10):
        with context.within(60):
            left = context.remaining()
            assert left is not None and left <= 10
        with context.within(0):
            assert context.expired()
    assert context.remaining() is None


def test_past_the_deadline_the_librarys_own_retries_stop_at_once(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    ledger = make_ledger()
    assert ledger.recorded() == 0
    started = time.monotonic()
    with context.within(0), pytest.raises(LedgerUnavailable):
        ledger.recorder.max_notification_id()  # the library's, retried 10 x 0.2 s on errors
    assert time.monotonic() - started < 0.5
