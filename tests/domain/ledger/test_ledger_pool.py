"""The ledger's datastore and pools: built through the libraries' public constructors, with the
library's settings, and the session setup the ledger adds to each connection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from eventsourcing.postgres import PostgresFactory

from api.bootstrap import build_pool, postgres_env
from api.settings import Settings
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.factory import LedgerDatastore, LedgerFactory
from domain.ledger.persistence.pool import RECONNECT_TIMEOUT, LedgerPool, ReadPool
from domain.ledger.persistence.sessions import connected_sessions, schema_tag
from domain.model.values import Scope


def _pool(ledger: MemoryLedger) -> Any:
    pool = ledger.factory.datastore.pool  # type: ignore[attr-defined]
    pool.wait()  # every connection open and idle
    return pool


def test_the_ledger_datastore_and_pool_are_the_ledgers(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    ledger = make_ledger(pool_size=4)
    assert type(ledger.factory.datastore) is LedgerDatastore  # type: ignore[attr-defined]
    pool = _pool(ledger)
    assert type(pool) is LedgerPool and pool.reconnect_timeout == RECONNECT_TIMEOUT


def _settings(obj: Any) -> dict[str, Any]:
    """An object's public, non-callable attributes (what the library set from the env)."""
    return {
        name: value
        for name, value in vars(obj).items()
        if not name.startswith("_") and not callable(value)
    }


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "POSTGRES_PRE_PING": "y",
            "POSTGRES_MAX_WAITING": "7",
            "POSTGRES_CONN_MAX_AGE": "123.5",
            "SINGLE_ROW_TRACKING": "n",
            "ORIGINATOR_ID_TYPE": "text",
            "POSTGRES_ENABLE_DB_FUNCTIONS": "y",
        },
    ],
)
def test_the_ledger_datastore_has_every_setting_the_library_read_from_the_env(
    database_url: str, pg_schema: str, overrides: dict[str, str]
) -> None:
    # LedgerFactory rebuilds the datastore the library built, from its public attributes: a
    # setting a new library release adds (and reads from the env) must not be lost.
    env = (
        postgres_env(
            Settings(database_url=database_url, db_schema=pg_schema, pool_size=3, max_overflow=2),
            database_url,
        )
        | overrides
    )
    library, ledger = PostgresFactory(env), LedgerFactory(env)
    try:
        expected, built = library.datastore, ledger.datastore
        assert _settings(built) == _settings(expected) | {
            "pool": built.pool,
            "session_name": None,
            "partitions": built.partitions,
        }
        assert _settings(built.pool) == _settings(expected.pool) | {
            "reconnect_timeout": RECONNECT_TIMEOUT,
            "name": built.pool.name,  # psycopg_pool numbers each pool it names
        }
        assert built.pool.connection_class == expected.pool.connection_class
        assert (built.pool.min_size, built.pool.max_size) == (3, 5)
        assert built.pool.closed  # as the library leaves it: opened on first use
    finally:
        library.close()
        ledger.close()


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


def test_the_workers_pool_is_a_read_pool(database_url: str, pg_schema: str) -> None:
    pool = build_pool(Settings(database_url=database_url, db_schema=pg_schema), database_url)
    try:
        assert type(pool) is ReadPool and pool.reconnect_timeout == RECONNECT_TIMEOUT
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
