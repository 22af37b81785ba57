"""A process starting beside a running worker (a rolling restart) creates the projection tables
without deadlocking with the worker's batch: each DDL statement commits on its own, so the
start never holds one table's lock while it waits for another's. A new schema's tables are made
in one transaction, the same as statement by statement."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from projections import startup
from projections.registry import all_projections
from projections.tracking import Tables
from projections.worker import ensure_tables


def waiting_on(conn: psycopg.Connection[Any], table: str, schema: str) -> bool:
    """Whether some session waits for a lock on this table."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE NOT l.granted AND n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    return bool(row and row[0])


def test_starting_beside_a_batch_in_flight_neither_deadlocks_nor_fails(
    database_url: str, pg_schema: str
) -> None:
    first, later = "active_memories", "search_terms"  # created in this order, both indexed
    t = Tables(pg_schema)
    table = {name: t[name] for name in (first, later)}
    errors: list[BaseException] = []
    with (
        ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool,
        psycopg.connect(database_url) as batch,  # a worker's batch: `later` written first
        psycopg.connect(database_url, autocommit=True) as watch,
    ):
        ensure_tables(pool, pg_schema, all_projections())  # the running system's tables
        batch.execute("SET lock_timeout = '5s'")
        batch.execute(sql.SQL("LOCK TABLE {} IN ROW EXCLUSIVE MODE").format(table[later]))

        def start() -> None:
            try:
                ensure_tables(pool, pg_schema, all_projections())
            except BaseException as error:  # reported below
                errors.append(error)

        starting = threading.Thread(target=start)
        starting.start()
        deadline = time.monotonic() + 30
        while not waiting_on(watch, t.name(later), pg_schema):  # the start has passed `first`
            assert time.monotonic() < deadline and starting.is_alive(), errors
            time.sleep(0.02)
        # The batch goes on to `first`: the start must not be holding it.
        batch.execute(sql.SQL("LOCK TABLE {} IN ROW EXCLUSIVE MODE").format(table[first]))
        batch.commit()
        starting.join(timeout=30)
    assert not starting.is_alive() and errors == []


def test_a_start_beside_a_locked_table_skips_its_maintenance_and_warns(
    database_url: str, pg_schema: str, caplog: Any
) -> None:
    t = Tables(pg_schema)
    with (
        ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool,
        psycopg.connect(database_url) as other,
    ):
        ensure_tables(pool, pg_schema, all_projections())
        with psycopg.connect(database_url, autocommit=True) as conn:  # an index of another view
            conn.execute(sql.SQL("DROP INDEX {}.{}").format(
                sql.Identifier(pg_schema), t.index("tombstones", "user"))
            )  # fmt: skip
        other.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(t["search_terms"]))
        ensure_tables(pool, pg_schema, all_projections(), lock_timeout=0.2)  # returns
        other.rollback()
        with psycopg.connect(database_url, autocommit=True) as conn:
            found = conn.execute(
                "SELECT to_regclass(%s)", (f"{pg_schema}.{t.name('tombstones')}__user",)
            ).fetchone()
    assert found is not None and found[0] is not None  # the other views' DDL was done
    assert any(
        "search_terms" in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records
    )


def _catalog(conn: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    """The schema's tables, columns, indexes and storage options, as comparable rows."""
    columns = conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default"
        " FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
        (schema,),
    ).fetchall()
    indexes = conn.execute(
        "SELECT tablename, indexname, replace(indexdef, %s, 'S') FROM pg_indexes"
        " WHERE schemaname = %s ORDER BY 1, 2",
        (schema, schema),
    ).fetchall()
    options = conn.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY 1",
        (schema,),
    ).fetchall()
    return [*columns, *indexes, *options]


def test_a_new_schemas_one_transaction_makes_what_statement_by_statement_makes(
    database_url: str, pg_schema: str, monkeypatch: Any
) -> None:
    other = f"{pg_schema}_b"
    with ConnectionPool(database_url, min_size=1, max_size=2, open=True) as pool:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(other)))
        try:
            made_at_once: list[str] = []
            original = startup._create_all
            monkeypatch.setattr(
                startup,
                "_create_all",
                lambda *args: (made_at_once.append("yes"), original(*args))[1],
            )
            ensure_tables(pool, pg_schema, all_projections())  # a new schema: at once
            assert made_at_once == ["yes"]
            monkeypatch.setattr(startup, "_none_exist", lambda *args: False)
            ensure_tables(pool, other, all_projections())  # statement by statement
            with psycopg.connect(database_url, autocommit=True) as conn:
                assert _catalog(conn, pg_schema) == _catalog(conn, other)
                assert _catalog(conn, pg_schema)
        finally:
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(other)))
