"""The ledger's pool hands out the connection returned last, so a steady writer stays on one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api.bootstrap import build_pool, postgres_env
from api.settings import Settings
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.pool import LifoConnectionPool, LifoReadPool
from domain.ledger.persistence.sessions import connected_sessions, schema_tag
from domain.model.values import Scope


def _pool(ledger: MemoryLedger) -> Any:
    pool = ledger.factory.datastore.pool  # type: ignore[attr-defined]
    pool.wait()  # every connection open and idle
    return pool


def _backend_pid(pool: Any) -> int:
    with pool.connection() as conn:
        return int(conn.info.backend_pid)


def test_the_ledger_pool_is_lifo(make_ledger: Callable[..., MemoryLedger]) -> None:
    assert isinstance(_pool(make_ledger(pool_size=4)), LifoConnectionPool)


def test_sequential_checkouts_reuse_the_connection_returned_last(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    pool = _pool(make_ledger(pool_size=4))
    with pool.connection() as first, pool.connection() as second:
        assert first.info.backend_pid != second.info.backend_pid
        last_returned = first.info.backend_pid  # `with` returns `second`, then `first`
    assert [_backend_pid(pool) for _ in range(6)] == [last_returned] * 6


def test_concurrent_checkouts_take_the_most_recently_returned_first(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    pool = _pool(make_ledger(pool_size=4))
    with pool.connection() as a, pool.connection() as b, pool.connection() as c:
        pids = [conn.info.backend_pid for conn in (a, b, c)]
    # Returned c, b, a: a is on top, then b.
    with pool.connection() as x, pool.connection() as y:
        assert [x.info.backend_pid, y.info.backend_pid] == pids[:2]


def test_every_ledger_connection_has_the_lock_timeout_for_its_session(
    database_url: str, pg_schema: str, master_key: str
) -> None:
    # Saves no longer send SET LOCAL lock_timeout: each pooled session must carry it, from the
    # first connections the pool opens on, and keep it after a save's transaction has ended.
    settings = Settings(
        database_url=database_url,
        db_schema=pg_schema,
        pool_size=3,
        lock_timeout=7,
        idle_in_transaction_timeout=9,
    )
    ledger = MemoryLedger(
        postgres_env(settings, database_url), MasterKeyring.from_base64([master_key])
    )
    try:
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key="k", content="fact", category="fact"
        )
        pool = _pool(ledger)
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            rows = [
                conn.execute(
                    "SELECT current_setting('lock_timeout') AS lock,"
                    " current_setting('idle_in_transaction_session_timeout') AS idle"
                ).fetchone()
                for conn in (a, b, c)
            ]
    finally:
        ledger.close()
    assert rows == [{"lock": "7s", "idle": "9s"}] * 3


def test_every_ledger_connection_is_named_after_its_master_keys(
    make_ledger: Callable[..., MemoryLedger], pg_schema: str
) -> None:
    # `keys rotate` reads these names from pg_stat_activity (persistence/sessions.py).
    keys = [generate_master_key() for _ in range(5)]
    ledger = make_ledger(keys=keys)
    ids = [key_id[:8] for key_id in ledger.keyring.held_ids]
    pool = _pool(ledger)
    with pool.connection() as a, pool.connection() as b, pool.connection() as c:
        names = [
            conn.execute("SELECT current_setting('application_name') AS n").fetchone()["n"]
            for conn in (a, b, c)
        ]
    expected = f"memledger s={schema_tag(pg_schema)} k={','.join(ids[:4])}+"
    assert names == [expected] * 3 and len(expected.encode()) <= 63
    sessions = connected_sessions(ledger.factory.datastore, pg_schema)  # type: ignore[attr-defined]
    assert len({s.pid for s in sessions}) >= 3 and all(
        s.key_ids == tuple(ids[:4]) for s in sessions
    )
    assert all(not s.names_all and s.holds(ledger.keyring.active_id) for s in sessions)
    assert connected_sessions(ledger.factory.datastore, pg_schema + "x") == []  # type: ignore[attr-defined]


def test_the_read_pool_reuses_the_connection_returned_last(
    database_url: str, pg_schema: str
) -> None:
    pool = build_pool(Settings(database_url=database_url, db_schema=pg_schema), database_url)
    try:
        assert isinstance(pool, LifoReadPool)
        with pool.connection() as first, pool.connection() as second:
            assert first.info.backend_pid != second.info.backend_pid
            last_returned = first.info.backend_pid
        assert [_backend_pid(pool) for _ in range(4)] == [last_returned] * 4
    finally:
        pool.close()
