"""The tables of a rebuild that did not finish: dropped at the next start and the next rebuild.

A rebuild fills tables of its own, named with a suffix (`__r` and 8 hex digits), and drops
them when it ends. Killed before (kill -9, an out-of-memory kill, the machine lost), it
leaves them behind, and with them sealed rows and term hashes of memories that may be
forgotten later: nothing would ever shred those. So each rebuild holds a session advisory lock
named after its suffix (`claimed`) from before it creates its first table until it dropped
them; `drop_leftovers`, run at start-up (projections/startup.py) and by every rebuild, drops
the suffixed tables whose lock no session holds: their rebuild is gone. A running rebuild's
tables are never touched.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from psycopg import Connection
from psycopg.sql import SQL, Identifier

from projections.tracking import PREFIX, lock_key, set_lock_timeout

__all__ = ["SUFFIX", "claimed", "drop_leftovers", "leftovers", "new_suffix"]

SUFFIX: Final = re.compile(r"__r[0-9a-f]{8}$")
"""How the tables of a rebuild end (see `new_suffix`)."""
_log = logging.getLogger(__name__)
_TABLES = SQL(
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname ~ %s ORDER BY c.relname"
)


def new_suffix() -> str:
    """A fresh rebuild's table suffix."""
    return f"__r{secrets.token_hex(4)}"


def _key(schema: str, suffix: str) -> int:
    return lock_key(schema, f"rebuild{suffix}")


@contextmanager
def claimed(conn: Connection[Any], schema: str, suffix: str) -> Iterator[None]:
    """Hold the lock that marks the tables with `suffix` as a live rebuild's (on `conn`'s
    session: it goes with the session if the process dies)."""
    with conn.transaction():
        conn.execute(SQL("SELECT pg_advisory_lock(%s)"), (_key(schema, suffix),))
    try:
        yield
    finally:
        try:
            with conn.transaction():
                conn.execute(SQL("SELECT pg_advisory_unlock(%s)"), (_key(schema, suffix),))
        except psycopg.Error:
            conn.close()  # the lock goes with the session; the pool drops the connection


def leftovers(conn: Connection[Any], schema: str) -> dict[str, list[str]]:
    """Every rebuild's tables in `schema`, running or not, by suffix."""
    pattern = "^" + re.escape(PREFIX) + ".+" + SUFFIX.pattern
    with conn.transaction():
        names = [row[0] for row in conn.execute(_TABLES, (schema, pattern)).fetchall()]
    found: dict[str, list[str]] = {}
    for name in names:
        match = SUFFIX.search(name)
        assert match is not None
        found.setdefault(match.group(), []).append(name)
    return found


def drop_leftovers(conn: Connection[Any], schema: str, lock_timeout: float = 5.0) -> list[str]:
    """Drop the tables of rebuilds no session runs any more; returns their names.

    Tables still locked (a killed rebuild's statement still running in its server session)
    stay, with a warning, for the next start or rebuild.
    """
    dropped: list[str] = []
    for suffix, names in leftovers(conn, schema).items():
        key = _key(schema, suffix)
        with conn.transaction():
            row = conn.execute(SQL("SELECT pg_try_advisory_lock(%s)"), (key,)).fetchone()
        if not (row and row[0]):
            continue  # a rebuild running now
        try:
            with conn.transaction():
                set_lock_timeout(conn, lock_timeout)
                tables = SQL(", ").join(Identifier(schema, name) for name in names)
                conn.execute(SQL("DROP TABLE IF EXISTS {}").format(tables))
            dropped += names
        except psycopg.errors.LockNotAvailable:
            _log.warning(
                "the tables of an ended rebuild (%s) stayed locked; dropped at the next start",
                suffix,
            )
        finally:
            with conn.transaction():
                conn.execute(SQL("SELECT pg_advisory_unlock(%s)"), (key,))
    if dropped:
        _log.warning("dropped %s tables of rebuilds that did not finish", len(dropped))
    return dropped
