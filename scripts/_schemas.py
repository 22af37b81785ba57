"""Throwaway schemas of the benchmark and evaluation scripts: a fresh name, and the drop."""

from __future__ import annotations

import uuid

import psycopg
from psycopg import sql

__all__ = ["drop_schema", "new_schema"]


def new_schema() -> str:
    """A fresh `bench_<12 hex>` schema name (bench_projections --reuse-schema expects it)."""
    return f"bench_{uuid.uuid4().hex[:12]}"


def drop_schema(url: str, schema: str) -> None:
    """Drop the schema and everything in it, waiting at most 30 s for locks."""
    with psycopg.connect(url, autocommit=True, options="-c lock_timeout=30s") as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
