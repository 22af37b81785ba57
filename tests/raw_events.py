"""Events written straight into a test's ledger tables, as a release this code does not know
(or a damaged ledger) would have written them: at the next position of a partition."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["insert_raw_event"]


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
