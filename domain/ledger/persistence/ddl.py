"""The ledger's DDL: the library's events table reworked for partitions, the side tables and the
partitions' objects, run by one process at a time; and the probe that tells it already ran.

`create_statements` builds LedgerRecorder's `sql_create_statements` from the library's;
`last_created` is the query LedgerRecorder.create_table runs to skip them all.
"""

from __future__ import annotations

import hashlib

from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Composed, Literal

from domain.ledger.persistence import partitions as partitioning
from domain.ledger.persistence import tables
from domain.ledger.persistence.reads import render

__all__ = ["create_statements", "last_created"]


def create_statements(
    recorder: PostgresApplicationRecorder, schema: str, partitions: int
) -> list[Composed]:
    """The recorder's DDL statements, in order, for a ledger of `partitions` partitions."""
    events = recorder.events_table_name
    statements = list(recorder.sql_create_statements)
    # The library's events table, led by the partition (Citus distributes by it), and
    # without its UNIQUE index on notification_id alone (Citus refuses a unique index
    # without the distribution column): partitions.events_table, event_indexes.
    statements[recorder.create_table_statement_index] = partitioning.events_table(
        schema, events, recorder.datastore.originator_id_type
    )
    statements = [
        statement
        for statement in statements
        if recorder.notification_id_index_name not in statement.as_string(None)
    ]
    statements.extend(tables.create_statements(schema))
    statements.extend(partitioning.create_statements(schema, events, partitions))
    # Two processes running this DDL at once (starting together on a new schema, or on
    # one of the release before partitions) would deadlock: each holds the SHARE lock of
    # a CREATE INDEX on the events table and waits for the other's to take the ALTER's.
    # So the transaction first waits, however long, for any other's to commit.
    statements[:0] = [
        SQL("SELECT set_config('lock_timeout', {}, true)").format(Literal("0")),
        SQL("SELECT pg_advisory_xact_lock({})").format(Literal(_ddl_lock(schema))),
    ]
    return statements


def last_created(schema: str, events: str) -> bytes:
    """A query with a row when the schema holds what the last DDL statement makes.

    The partitions' statements go after the side tables': a ledger of the release before
    partitions has the side tables' LAST_CREATED but not this, and gets the partition columns
    and heads."""
    return render(
        SQL(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = {} AND c.relname = {}"
        ).format(Literal(schema), Literal(partitioning.unplaced_index(events)))
    )


def _ddl_lock(schema: str) -> int:
    """The advisory lock id of the ledger's DDL in this schema."""
    digest = hashlib.sha256(f"memledger/{schema}/ledger-ddl".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
