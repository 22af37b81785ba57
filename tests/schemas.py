"""Throwaway test schemas: dropping one safely while other runs share the server."""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

__all__ = ["drop_schema"]


def drop_schema(database_url: str, name: str, attempts: int = 5) -> None:
    """Drop a schema and everything in it, retrying a deadlock.

    Another run on the same server may be locking every table of the database one by one
    (the shredding test's whole-database pg_dump), in another order than DROP ... CASCADE.
    """
    for attempt in range(attempts):
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
                conn.execute(drop)
            return
        except psycopg.errors.DeadlockDetected:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
