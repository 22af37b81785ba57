"""The pg_schema fixture gives each test a usable schema of its own."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.integration


def test_pg_schema_is_fresh_and_usable(database_url: str, pg_schema: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
        ).fetchone()
        assert tables == (0,)

        table = sql.Identifier(pg_schema, "note")
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, body text)").format(table))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1, 'hello')").format(table))
        rows = conn.execute(sql.SQL("SELECT id, body FROM {}").format(table)).fetchall()

    assert rows == [(1, "hello")]
