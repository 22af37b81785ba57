"""The ledger's partitions: which one holds a user, their heads, and reading one of them.

A schema's ledger has P partitions, fixed when the schema is created (`MEMLEDGER_PARTITIONS`,
default 32; docs/ledger.md says how to choose). A user's aggregates all live in one: the
partition is a keyed hash of the user id (under the ledger's own key, so no caller can aim
their ids at one partition). Each partition is its own gap-free sequence of positions:

- `memledger_ledger_heads` has one row per partition, its last position. A save takes its
  partition's row (the UPDATE in `INSERT_EVENT`) before inserting the events: saves of one
  partition commit one after another, in position order, and those of different partitions
  never wait for each other. A save that fails rolls its head back: no gap.
- the events table gets three columns: `partition`, `position` (unique together) and
  `recorded_at`, the commit-ordered time taken under the head's lock (never earlier than the
  partition's previous event), by which readers merge partitions.

Rows written before partitions existed have NULL there until the upgrade assigns them
(persistence/upgrade.py).
"""

from __future__ import annotations

from typing import Final

from psycopg.sql import SQL, Composed, Identifier, Literal

from domain.ledger.positions import MAX_PARTITIONS

__all__ = [
    "DEFAULT_PARTITIONS",
    "HEADS",
    "PARTITIONS_ENV",
    "create_statements",
    "event_indexes",
    "events_key",
    "events_table",
    "partition_count",
    "partition_of_user",
    "unplaced_index",
]

HEADS: Final = "memledger_ledger_heads"
PARTITIONS_ENV: Final = "MEMLEDGER_PARTITIONS"
DEFAULT_PARTITIONS: Final = 32


def partition_count(text: str | None) -> int:
    """The partition count a new schema is made with, from the application's env value
    (`PARTITIONS_ENV`, set from the service's settings; an existing schema keeps its own)."""
    count = int(text) if text and text.strip() else DEFAULT_PARTITIONS
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"{PARTITIONS_ENV} must be between 1 and {MAX_PARTITIONS}")
    return count


def partition_of_user(keyed_digest: str, partitions: int) -> int:
    """The partition of a user, from the keyed hash of their id (hex)."""
    return int(keyed_digest[:16], 16) % partitions


def create_statements(schema: str, events: str, partitions: int) -> list[Composed]:
    """Idempotent DDL: the partition columns of the events table, their index and the heads.

    The heads are filled once, when the table is empty: a later start with another
    `MEMLEDGER_PARTITIONS` leaves an existing ledger's partitions as they are.
    """
    events_table = SQL("{}.{}").format(Identifier(schema), Identifier(events))
    heads = SQL("{}.{}").format(Identifier(schema), Identifier(HEADS))
    return [
        SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS partition int NULL,"
            " ADD COLUMN IF NOT EXISTS position bigint NULL,"
            " ADD COLUMN IF NOT EXISTS recorded_at timestamptz NULL"
        ).format(events_table),
        # New rows must have a partition (NOT VALID: the old ones are placed by the upgrade).
        # A process of the release before partitions still running would insert rows without
        # one, which the upgrade could only place after events committed later (a user's
        # events out of order): its saves fail instead, until it is stopped.
        SQL(
            "DO $$ BEGIN ALTER TABLE {} ADD CONSTRAINT {} CHECK (partition IS NOT NULL) NOT VALID;"
            " EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        ).format(events_table, Identifier(f"{events}_partitioned")),
        SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (partition, position)").format(
            Identifier(f"{events}_partition_position_idx"), events_table
        ),
        *event_indexes(schema, events),
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " partition int PRIMARY KEY,"
            " position bigint NOT NULL DEFAULT 0,"
            " recorded_at timestamptz NOT NULL DEFAULT '-infinity')"
        ).format(heads),
        SQL(
            "INSERT INTO {0} (partition) SELECT p FROM generate_series(0, {1}) AS p"
            " WHERE NOT EXISTS (SELECT 1 FROM {0})"
        ).format(heads, Literal(partitions - 1)),
        # The rows the upgrade has still to place (persistence/upgrade.py): empty once it ran,
        # so finding that nothing is left is one probe of an empty index at every start.
        # Last: the recorder runs this DDL unless the schema holds it (`unplaced_index`).
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (notification_id) WHERE partition IS NULL").format(
            Identifier(unplaced_index(events)), events_table
        ),
    ]


def events_table(schema: str, events: str, id_type: str) -> Composed:
    """The events table of a new schema (it replaces the library's CREATE TABLE, through the
    recorder's `sql_create_statements`): the partition columns from the start, and the primary
    key led by `partition`. Citus distributes a table only when each of its unique constraints
    includes the distribution column (`partition`): so no unique index on `notification_id`
    alone (`event_indexes`). `notification_id` is the library's column, kept for the events
    written before partitions (a position given out then: `legacy_position`); a new event has
    none (its position replaced it), and no sequence default (see `insert_event`). The
    library's settings of the table are kept."""
    return SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        " originator_id {} NOT NULL, originator_version bigint NOT NULL, topic text,"
        " state bytea, notification_id bigint NULL, partition int NOT NULL,"
        " position bigint NULL, recorded_at timestamptz NULL,"
        " CONSTRAINT {} PRIMARY KEY (partition, originator_id, originator_version))"
        " WITH (autovacuum_enabled = true, autovacuum_vacuum_threshold = 100000000,"
        " autovacuum_vacuum_scale_factor = 0.5, autovacuum_analyze_threshold = 1000,"
        " autovacuum_analyze_scale_factor = 0.01)"
    ).format(
        SQL("{}.{}").format(Identifier(schema), Identifier(events)),
        Identifier(id_type),
        Identifier(events_key(events)),
    )


def events_key(events: str) -> str:
    """The name of the events table's primary key (partition, originator id, version)."""
    return f"{events}_partition_pkey"


def event_indexes(schema: str, events: str) -> list[Composed]:
    """The events table's other indexes: an aggregate's events by originator id (its loads
    name no partition: the library's `select_events`), and the notification ids unique in
    each partition (a position given out before partitions: `legacy_position`)."""
    events_table = SQL("{}.{}").format(Identifier(schema), Identifier(events))
    return [
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (originator_id, originator_version)").format(
            Identifier(f"{events}_originator_idx"), events_table
        ),
        SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (partition, notification_id)").format(
            Identifier(f"{events}_partition_notification_idx"), events_table
        ),
    ]


def unplaced_index(events: str) -> str:
    """The name of the index of the events no partition holds yet (written before partitions)."""
    return f"{events}_unplaced_idx"


def insert_event(schema: str, events: str, id_type: str) -> tuple[Composed, str, Composed, str]:
    """The two statements that put one event at its partition's next position, with their
    parameters' PostgreSQL types (`$1` first): the head's UPDATE (its row lock is what orders a
    partition's commits), then the INSERT reading the new head; it returns the position.

    Two statements, not one with the UPDATE in a CTE: Citus runs a modifying CTE, and an
    INSERT ... SELECT into a table whose column has a sequence default, by pulling the rows
    to the coordinator (an intermediate result: 5.0 to 5.2 ms an event on the loopback cluster,
    against 1.7 to 1.9 ms for these two, each routed to the partition's shard; hence no
    `notification_id` default either: `events_table`). Both go in the save's one pipeline.
    The time is `statement_timestamp()`, not `clock_timestamp()`: Citus refuses a VOLATILE
    function in an UPDATE of a distributed table ("functions used in UPDATE queries on
    distributed tables must not be VOLATILE"); `greatest` keeps a partition's times in its
    commit order either way. The INSERT names the head's `partition` column, not the
    parameter, so Citus sees the rows stay in their shard (tests/citus/test_routing.py).
    """
    heads = SQL("{}.{}").format(Identifier(schema), Identifier(HEADS))
    bump = SQL(
        "UPDATE {} SET position = position + 1,"
        " recorded_at = greatest(recorded_at, statement_timestamp()) WHERE partition = $1"
    ).format(heads)
    insert = SQL(
        "INSERT INTO {} (originator_id, originator_version, topic, state, partition,"
        " position, recorded_at)"
        " SELECT $1, $2, $3, $4, h.partition, h.position, h.recorded_at FROM {} h"
        " WHERE h.partition = $5 RETURNING position"
    ).format(SQL("{}.{}").format(Identifier(schema), Identifier(events)), heads)
    return bump, "int4", insert, f"{id_type} int8 text bytea int4"


def select_partition(schema: str, events: str) -> Composed:
    """Events of one partition after a position, in order, up to an optional last one.

    Parameters: partition, after, until and until again (NULL: no end), topics and topics
    again (NULL: all), limit.
    """
    return SQL(
        "SELECT position, originator_id, originator_version, topic, state FROM {}.{}"
        " WHERE partition = %s AND position > %s"
        " AND (%s::bigint IS NULL OR position <= %s::bigint)"
        " AND (%s::text[] IS NULL OR topic = ANY(%s::text[]))"
        " ORDER BY position LIMIT %s"
    ).format(Identifier(schema), Identifier(events))


def select_heads(schema: str) -> Composed:
    """Every partition's last position."""
    return SQL("SELECT partition, position FROM {}.{} ORDER BY partition").format(
        Identifier(schema), Identifier(HEADS)
    )
