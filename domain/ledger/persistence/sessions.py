"""Ledger sessions named after the master keys their process holds, and finding them again.

Every ledger connection sets its `application_name` (factory's configure callback) to

    memledger s=<sha256(schema)[:8]> k=<active id[:8]>,<id[:8]>,...

so `memledger keys rotate` can tell, from `pg_stat_activity`, whether every process connected
to the schema holds the key it is about to wrap every data key under:

    name = session_name("memledger", ["1a2b3c4d5e6f7a8b", "99887766554433ff"])
    for session in connected_sessions(datastore, "memledger"):
        session.holds("1a2b3c4d5e6f7a8b")

PostgreSQL keeps 63 bytes of an `application_name` (NAMEDATALEN - 1): the prefix takes 23, so
at most `MAX_NAMED_KEYS` (4) ids fit. A process holding more names its first four (the active
one first) and ends the list with `+`; such a session may hold a key it does not name.
Processes of releases before this naming, and connections outside a ledger's pool, are not seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from psycopg.sql import SQL

from domain.ledger.persistence import reads
from domain.ledger.persistence.reads import Connections

__all__ = [
    "MAX_NAMED_KEYS",
    "SESSION_NAME_ENV",
    "Session",
    "connected_sessions",
    "schema_tag",
    "session_name",
]

SESSION_NAME_ENV: Final = "MEMLEDGER_SESSION_NAME"
"""The ledger env entry holding the name (MemoryLedger.construct_env sets it)."""

MAX_NAMED_KEYS: Final = 4
_PREFIX: Final = "memledger s="
_ID_LENGTH: Final = 8
_MORE: Final = "+"

_SQL_SESSIONS: Final = reads.render(
    SQL(
        "SELECT pid, host(client_addr) AS client, backend_start, application_name"
        " FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE %s"
        " ORDER BY backend_start, pid"
    )
)


def schema_tag(schema: str) -> str:
    """The 8 hex digits naming a schema in session names (an empty schema is `public`)."""
    return hashlib.sha256((schema or "public").encode()).hexdigest()[:_ID_LENGTH]


def session_name(schema: str, key_ids: Sequence[str]) -> str:
    """The `application_name` of a process on `schema` holding `key_ids` (the active first)."""
    named = ",".join(key_id[:_ID_LENGTH] for key_id in key_ids[:MAX_NAMED_KEYS])
    more = _MORE if len(key_ids) > MAX_NAMED_KEYS else ""
    return f"{_PREFIX}{schema_tag(schema)} k={named}{more}"


@dataclass(frozen=True)
class Session:
    """One connected ledger session: its server pid, client address (None: a Unix socket, or
    not visible to this role), when it started, and the master key ids (8 hex) it names."""

    pid: int
    client: str | None
    started: datetime | None
    key_ids: tuple[str, ...]
    names_all: bool  # False: the process holds more keys than its name could list

    def holds(self, key_id: str) -> bool:
        """Whether the process names this master key (a full id or its first 8 digits)."""
        return key_id[:_ID_LENGTH] in self.key_ids

    def describe(self) -> str:
        """`pid 1234 from 10.0.0.5 since 2026-06-01T12:00:00+00:00 holding 1a2b3c4d,99887766`"""
        # Both None: the session is another role's, hidden without pg_read_all_stats.
        client = self.client or ("local" if self.started else "?")
        started = self.started.isoformat(timespec="seconds") if self.started else "?"
        keys = ",".join(self.key_ids) + ("" if self.names_all else ",...")
        return f"pid {self.pid} from {client} since {started} holding {keys}"


def connected_sessions(connections: Connections, schema: str) -> list[Session]:
    """The ledger sessions connected to this database for `schema`, oldest first (ours too)."""
    pattern = f"{_PREFIX}{schema_tag(schema)} k=%"
    rows = reads.fetch_all(connections, _SQL_SESSIONS, (pattern,))
    sessions = []
    for row in rows:
        listed = str(row["application_name"]).split(" k=", 1)[1]
        names_all = not listed.endswith(_MORE)
        ids = tuple(i for i in listed.removesuffix(_MORE).split(",") if i)
        sessions.append(
            Session(int(row["pid"]), row["client"], row["backend_start"], ids, names_all)
        )
    return sessions
