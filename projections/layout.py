"""Live tables laid out by an older version: found when tables are ensured, projected again.

A release may change a view's columns (their types, say: search terms became int8 hashes).
The new code cannot write into the old table, nor read it, so `ensure_tables` asks `stale`
which projections' live tables differ from what their own `create` makes now, and `reset`
drops those tables and sets their position back to 0: they are created anew and the worker
projects them again from the log (the projections of the other tables are not touched).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any

from psycopg import Connection
from psycopg.sql import SQL

from projections.base import Projection
from projections.tracking import Tables, reset_positions

__all__ = ["reset", "stale"]

_log = logging.getLogger(__name__)

_COLUMNS = SQL(
    "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)"
    " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind = 'r'"
    " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum"
)


def stale(
    conn: Connection[Any], projections: Sequence[Projection], live: Tables
) -> list[Projection]:
    """The projections with a live table whose columns (names, types, order) differ from the
    table their `create` makes now; a missing table is not stale (it is simply created)."""
    names = [live.name(n) for projection in projections for n in projection.tables]
    # One transaction, rolled back, and nothing outside it: on a connection that is not in
    # autocommit mode, a statement outside would open a transaction the caller's later DDL
    # statements would join (and hold each table's lock till its end).
    with conn.transaction(force_rollback=True):
        columns = _columns(conn, live.schema, names)
        if not columns:
            return []  # a new schema: nothing to compare
        expected = _current(conn, projections, live.schema)
    found = []
    for projection in projections:
        for name in projection.tables:
            now, before = expected[projection.name][name], columns.get(live.name(name))
            if before is not None and before != now:
                _log.warning(
                    "projection %s: table %s was laid out by another version (columns that"
                    " differ: %s); it is projected again from the log",
                    projection.name,
                    live.name(name),
                    sorted(set(before) ^ set(now or ())),
                )
                found.append(projection)
                break
    return found


_Columns = list[tuple[str, str]]
_CURRENT: dict[tuple[str, ...], dict[str, _Columns | None]] = {}
"""Per process: a projection's DDL (as text, under a fixed schema name) -> the columns of each
of its logical tables that DDL makes. The layout follows from the code alone, so each process
probes it once, not at every start or `ensure_tables` call."""


def _current(
    conn: Connection[Any], projections: Sequence[Projection], schema: str
) -> dict[str, dict[str, _Columns | None]]:
    """Each projection's tables' columns as its `create` makes them now, read off tables
    created under another suffix in the caller's transaction (which rolls them back) the first
    time this process asks."""
    keys = {p.name: _ddl_key(p) for p in projections}
    missing = [p for p in projections if keys[p.name] not in _CURRENT]
    if missing:
        probe = Tables(schema, f"__probe{secrets.token_hex(4)}")
        for projection in missing:
            for statement in projection.create(probe):
                conn.execute(statement)
        names = [probe.name(n) for p in missing for n in p.tables]
        columns = _columns(conn, schema, names)
        for projection in missing:
            _CURRENT[keys[projection.name]] = {
                n: columns.get(probe.name(n)) for n in projection.tables
            }
    return {p.name: _CURRENT[keys[p.name]] for p in projections}


def _ddl_key(projection: Projection) -> tuple[str, ...]:
    return tuple(s.as_string(None) for s in projection.create(Tables("__layout__")))


def _columns(conn: Connection[Any], schema: str, names: list[str]) -> dict[str, _Columns]:
    columns: dict[str, _Columns] = {}
    for table, column, kind in conn.execute(_COLUMNS, (schema, names)).fetchall():
        columns.setdefault(table, []).append((column, kind))
    return columns


def reset(conn: Connection[Any], projections: Sequence[Projection], live: Tables) -> None:
    """Drop the live tables of `projections` and set their positions back to 0, in one
    transaction (it waits for a worker's batch on them to end)."""
    with conn.transaction(), conn.cursor() as cur:
        for projection in projections:
            for name in projection.tables:
                cur.execute(SQL("DROP TABLE IF EXISTS {}").format(live[name]))
            reset_positions(cur, live, projection.name)
