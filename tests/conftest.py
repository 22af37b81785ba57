"""Fixtures shared by the whole suite: a PostgreSQL URL and a fresh schema per test."""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from api.embedded import ensure_schema, start_embedded_postgres

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real PostgreSQL server")


@pytest.fixture(scope="session")
def database_url() -> str:
    """The server under test: MEMLEDGER_DATABASE_URL, else an embedded one under .memledger/."""
    url = os.environ.get("MEMLEDGER_DATABASE_URL")
    if url:
        return url
    return start_embedded_postgres(REPO_ROOT / ".memledger" / "test-postgres")


@pytest.fixture
def pg_schema(database_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped with everything in it afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    ensure_schema(database_url, name)
    try:
        yield name
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
