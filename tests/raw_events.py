"""Events written straight into a test's ledger tables, as a release this code does not know
(or a damaged ledger) would have written them: at the next position of a partition."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["insert_raw_event", "number_as_released_before"]


def insert_raw_event(
    conn: psycopg.Connection[Any],
    schema: str,
    topic: str,
    state: bytes,
    *,
    partition: int = 0,
    originator_id: uuid.UUID | None = None,
    version: int = 1,
) -> int:
    """Insert one event at its partition's next position (taking the head, as a save does);
    returns that position within the partition."""
    row = conn.execute(
        sql.SQL(
            "WITH head AS (UPDATE {}.memledger_ledger_heads SET position = position + 1,"
            " recorded_at = greatest(recorded_at, clock_timestamp()) WHERE partition = %s"
            " RETURNING position, recorded_at)"
            " INSERT INTO {}.memledger_events (originator_id, originator_version, topic, state,"
            " partition, position, recorded_at)"
            " SELECT %s, %s, %s, %s, %s, position, recorded_at FROM head RETURNING position"
        ).format(sql.Identifier(schema), sql.Identifier(schema)),
        (partition, originator_id or uuid.uuid4(), version, topic, state, partition),
    ).fetchone()
    assert row is not None, f"no partition {partition}"
    return int(row[0])


def number_as_released_before(conn: psycopg.Connection[Any], schema: str, events: str) -> None:
    """Give every event the notification id the releases before issue 27 gave it (this one
    gives none: domain/ledger/persistence/partitions.py, `insert_event`): one global sequence
    in commit order (a partition's positions in order, partitions merged by their commit
    times), the column NOT NULL with its sequence default, as `bigserial` made it."""
    table = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(events))
    sequence = sql.SQL("{}.{}").format(
        sql.Identifier(schema), sql.Identifier(f"{events}_notification_id_seq")
    )
    conn.execute(sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}").format(sequence))
    conn.execute(
        sql.SQL(
            "UPDATE {0} AS e SET notification_id = n.id FROM (SELECT originator_id,"
            " originator_version, row_number() OVER (ORDER BY recorded_at, partition, position)"
            " AS id FROM {0}) AS n WHERE e.originator_id = n.originator_id"
            " AND e.originator_version = n.originator_version AND e.notification_id IS NULL"
        ).format(table)
    )
    conn.execute(
        sql.SQL("SELECT setval({}, greatest((SELECT max(notification_id) FROM {}), 1))").format(
            sql.Literal(f'"{schema}"."{events}_notification_id_seq"'), table
        )
    )
    conn.execute(
        sql.SQL(
            "ALTER TABLE {} ALTER COLUMN notification_id SET NOT NULL,"
            " ALTER COLUMN notification_id SET DEFAULT nextval({})"
        ).format(table, sql.Literal(f'"{schema}"."{events}_notification_id_seq"'))
    )
