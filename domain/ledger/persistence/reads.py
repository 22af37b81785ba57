"""One-statement queries on the ledger's database, outside the event-writing transactions.

`fetch_one`, `fetch_all` and `execute` run one statement (rendered once with `render`) on a
connection of `Connections` in autocommit, retried when the connection turns out to be broken
(`domain.context.on_outage`, within the caller's deadline).
Never run them inside a transaction that may roll back: psycopg would deallocate every prepared
statement of the connection (docs/ledger.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from psycopg import Connection
from psycopg.rows import DictRow
from psycopg.sql import Composable

from domain.context import on_outage

__all__ = ["Connections", "execute", "fetch_all", "fetch_one", "render"]


class Connections(Protocol):
    """Where the reads run: the library's PostgresDatastore, or one connection of a process.

    `get_connection` lends an autocommit connection with dict rows; `schema` names the
    schema of the ledger's tables.
    """

    schema: str

    def get_connection(self) -> AbstractContextManager[Connection[DictRow]]: ...


def render(statement: Composable) -> bytes:
    """A composed statement rendered once, so executing it costs no composing per call."""
    return statement.as_bytes(None)


@on_outage
def fetch_all(
    datastore: Connections, statement: bytes, params: Sequence[Any] = ()
) -> list[dict[str, Any]]:
    """Every row of one read-only statement."""
    with datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(statement, params)
        return curs.fetchall()


@on_outage
def fetch_one(
    datastore: Connections, statement: bytes, params: Sequence[Any] = ()
) -> dict[str, Any] | None:
    """The first row of one read-only statement, or None."""
    with datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(statement, params)
        return curs.fetchone()


@on_outage
def execute(datastore: Connections, statement: bytes, params: Sequence[Any] = ()) -> None:
    """One idempotent write statement, committed on its own (safe to run again)."""
    with datastore.get_connection() as conn, conn.cursor() as curs:
        curs.execute(statement, params)
