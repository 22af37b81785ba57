"""Keying by partition in place the write-side tables of the release before issue 27.

That release's data keys, key claims and candidate fingerprints have no `partition`, and their
keys are global (`key_id`, `claim`, `candidate_id`, ...); its events table has the library's
primary key (originator_id, originator_version) and a UNIQUE index on `notification_id` alone.
Citus distributes a table by a column only when every unique constraint includes it, and a
foreign key between distributed tables only when both sides include it (issue 27). `rekey`
brings such a schema to this release's shape (persistence/tables.py `SHAPES`,
persistence/partitions.py `events_table`):

- each side-table row gets its user's partition, computed in Python by the ledger's
  `partition_of` (the keyed hash under the ledger's key, which only the ledger holds); the
  ledger's own key (owner "") goes to `LEDGER_PARTITION`;
- the old foreign keys, primary keys, unique constraints and indexes are dropped and this
  release's (all led by `partition`) added, the foreign keys NOT VALID as before (rows written
  before keys were checked may name none); ON DELETE CASCADE stays: destroying a memory's key
  still deletes its candidates' keys, claims and fingerprints (crypto-shredding);
- the events (already placed in partitions: persistence/upgrade.py runs first) get
  `partition` NOT NULL and the primary key (partition, originator_id, originator_version); the
  UNIQUE index on notification_id becomes (partition, notification_id), which is what
  `LedgerRecorder.legacy_position` reads by (the old notification ids, unique per partition).

One transaction, under an advisory lock (two processes starting at once: the second finds it
done) and the tables' ACCESS EXCLUSIVE locks: saves wait until it commits, a failure leaves the
schema as it was. Once done, a start costs one catalog probe (`needed`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, Final

from psycopg import Connection
from psycopg.sql import SQL, Composed, Identifier, Literal

from domain.ledger.persistence import reads
from domain.ledger.persistence.partitions import event_indexes, events_key
from domain.ledger.persistence.reads import Connections, render
from domain.ledger.persistence.tables import (
    DATA_KEYS,
    FINGERPRINTS,
    KEY_CLAIMS,
    LEDGER_PARTITION,
    SHAPES,
    constraint,
    index_statement,
    table,
)

__all__ = ["needed", "rekey"]

_log = logging.getLogger(__name__)
_USERS: Final = "memledger_rekey_users"

_OLD_FOREIGN_KEYS: Final = (  # dropped first: they depend on the old unique keys
    (KEY_CLAIMS, "memledger_claim_hashed_under_fkey"),
    (FINGERPRINTS, "memledger_print_hashed_under_fkey"),
    (DATA_KEYS, DATA_KEYS + "_subject_fkey"),
)
_OLD_CONSTRAINTS: Final = (
    (DATA_KEYS, DATA_KEYS + "_pkey"),
    (KEY_CLAIMS, KEY_CLAIMS + "_pkey"),
    (KEY_CLAIMS, KEY_CLAIMS + "_memory_id_key"),
    (FINGERPRINTS, FINGERPRINTS + "_pkey"),
)
_OLD_INDEXES: Final = (
    DATA_KEYS + "_user_idx",
    DATA_KEYS + "_subject_idx",
    DATA_KEYS + "_check_idx",
    KEY_CLAIMS + "_user_idx",
    KEY_CLAIMS + "_key_idx",
    FINGERPRINTS + "_lookup_idx",
    FINGERPRINTS + "_pending_idx",
    FINGERPRINTS + "_decided_idx",
    FINGERPRINTS + "_key_idx",
)


def _lock_id(schema: str) -> int:
    digest = hashlib.sha256(f"memledger/{schema}/ledger-rekey".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _keys(events: str) -> list[str]:
    """The primary keys this release names: present, all of them, once the schema is keyed."""
    return [shape.constraints[0][0] for shape in SHAPES] + [events_key(events)]


def _probe(schema: str, events: str) -> bytes:
    return render(
        SQL(
            "SELECT count(*) AS n FROM pg_constraint c JOIN pg_namespace n"
            " ON n.oid = c.connamespace WHERE n.nspname = {} AND c.conname = ANY({})"
        ).format(Literal(schema), Literal(_keys(events)))
    )


def needed(datastore: Connections, events: str) -> bool:
    """Whether some table still lacks its partition-led primary key (one catalog probe)."""
    row = reads.fetch_one(datastore, _probe(datastore.schema, events))
    return row is None or int(row["n"]) < len(_keys(events))


def rekey(datastore: Connections, events: str, partition_of: Callable[[str], int]) -> int:
    """Bring the schema to this release's keys (see the module's docstring); how many side-table
    rows were given a partition (0: nothing was left to do)."""
    if not needed(datastore, events):
        return 0
    schema = datastore.schema
    with datastore.get_connection() as conn, conn.transaction():
        conn.execute("SELECT set_config('lock_timeout', '0', true)", prepare=False)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_id(schema),), prepare=False)
        row = conn.execute(_probe(schema, events), prepare=False).fetchone()
        if row is not None and int(row["n"]) == len(_keys(events)):
            return 0  # another process did it while this one waited
        partitions = _user_partitions(conn, schema, partition_of, {})
        tables = [table(schema, shape.name) for shape in SHAPES]
        conn.execute(
            SQL("LOCK TABLE {}, {} IN ACCESS EXCLUSIVE MODE").format(
                SQL(", ").join(tables), table(schema, events)
            ),
            prepare=False,
        )
        # Users whose first rows committed between the read above and the lock.
        partitions = _user_partitions(conn, schema, partition_of, partitions)
        filled = _fill(conn, schema, partitions)
        _rekey_side_tables(conn, schema)
        _rekey_events(conn, schema, events)
    _log.info("ledger upgrade: write-side tables keyed by partition (%s rows placed)", filled)
    return filled


def _has_partition(conn: Connection[Any], schema: str, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s"
        " AND column_name = 'partition'",
        (schema, name),
        prepare=False,
    ).fetchone()
    return row is not None


def _user_partitions(
    conn: Connection[Any],
    schema: str,
    partition_of: Callable[[str], int],
    known: dict[str, int],
) -> dict[str, int]:
    """`known`, plus the partition of every other user owning a side-table row that has none."""
    found = dict(known)
    for shape in SHAPES:
        where = (
            SQL(" WHERE partition IS NULL") if _has_partition(conn, schema, shape.name) else SQL("")
        )
        rows = conn.execute(
            SQL("SELECT DISTINCT user_id FROM {}{}").format(table(schema, shape.name), where),
            prepare=False,
        ).fetchall()
        for row in rows:
            user = str(row["user_id"])
            if user not in found:
                found[user] = partition_of(user) if user else LEDGER_PARTITION
    return found


def _fill(conn: Connection[Any], schema: str, partitions: dict[str, int]) -> int:
    """The columns this release adds, filled: each row's user's partition."""
    users = list(partitions)
    conn.execute(
        SQL(
            "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT * FROM"
            " unnest(%s::text[], %s::int[]) AS u(user_id, partition)"
        ).format(Identifier(_USERS)),
        (users, [partitions[u] for u in users]),
        prepare=False,
    )
    filled = 0
    for shape in SHAPES:
        target = table(schema, shape.name)
        # Tables older still lack the key columns too (nullable: not checked).
        added = [SQL("ADD COLUMN IF NOT EXISTS partition int NULL")]
        if shape.name != DATA_KEYS:
            added.append(SQL("ADD COLUMN IF NOT EXISTS key_id uuid NULL"))
        added.append(SQL("ADD COLUMN IF NOT EXISTS key_check bytea NULL"))
        conn.execute(SQL("ALTER TABLE {} {}").format(target, SQL(", ").join(added)), prepare=False)
        cursor = conn.execute(
            SQL(
                "UPDATE {0} AS t SET partition = u.partition FROM {1} AS u"
                " WHERE t.user_id = u.user_id AND t.partition IS NULL"
            ).format(target, Identifier(_USERS)),
            prepare=False,
        )
        filled += max(cursor.rowcount, 0)
        conn.execute(
            SQL("ALTER TABLE {} ALTER COLUMN partition SET NOT NULL").format(target), prepare=False
        )
    return filled


def _rekey_side_tables(conn: Connection[Any], schema: str) -> None:
    for name, old in (*_OLD_FOREIGN_KEYS, *_OLD_CONSTRAINTS):
        conn.execute(
            SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                table(schema, name), Identifier(old)
            ),
            prepare=False,
        )
    for index in _OLD_INDEXES:
        conn.execute(SQL("DROP INDEX IF EXISTS {}").format(table(schema, index)), prepare=False)
    for shape in SHAPES:  # the keys first: the others' foreign keys reference them
        target = table(schema, shape.name)
        for name, definition in shape.constraints:
            if not _constraint_exists(conn, schema, name):
                foreign = " NOT VALID" if definition.startswith("FOREIGN KEY") else ""
                conn.execute(
                    SQL("ALTER TABLE {} ADD CONSTRAINT {} {}{}").format(
                        target, Identifier(name), constraint(schema, definition), SQL(foreign)
                    ),
                    prepare=False,
                )
        for name, definition in shape.indexes:
            conn.execute(index_statement(target, name, definition), prepare=False)


def _rekey_events(conn: Connection[Any], schema: str, events: str) -> None:
    target = table(schema, events)
    statements: list[Composed] = [
        SQL("ALTER TABLE {} ALTER COLUMN partition SET NOT NULL").format(target),
        SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
            target, Identifier(f"{events}_pkey")
        ),
        SQL("DROP INDEX IF EXISTS {}").format(table(schema, f"{events}_notification_id_idx")),
        # New events have no notification id (partitions.insert_event says why).
        SQL(
            "ALTER TABLE {} ALTER COLUMN notification_id DROP DEFAULT,"
            " ALTER COLUMN notification_id DROP NOT NULL"
        ).format(target),
    ]
    if not _constraint_exists(conn, schema, events_key(events)):
        statements.append(
            SQL(
                "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY"
                " (partition, originator_id, originator_version)"
            ).format(target, Identifier(events_key(events)))
        )
    for statement in [*statements, *event_indexes(schema, events)]:
        conn.execute(statement, prepare=False)


def _constraint_exists(conn: Connection[Any], schema: str, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
        " WHERE n.nspname = %s AND c.conname = %s",
        (schema, name),
        prepare=False,
    ).fetchone()
    return row is not None
