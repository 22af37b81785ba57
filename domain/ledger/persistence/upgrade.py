"""Partitioning in place a ledger written by the release before partitions (issue 26).

That release's events table has no `partition`, `position` or `recorded_at` (the recorder's
DDL adds them, NULL, and an empty heads table: persistence/partitions.py). `place` puts each
such event where a partitioned ledger would have written it:

- its partition is its user's (`partition_of`: the keyed hash under the ledger's key, which
  only the ledger holds, so the caller passes it in), the user read from the clear part of
  the aggregate's first event (every aggregate's Created event carries `user_id` in clear);
- positions follow the partition's head, 1..n in the old notification id order, which was
  the old commit order: replay and as-of keep their meaning inside each partition;
- `recorded_at` is the event's own timestamp (clear part), never earlier than the
  partition's previous event, as a save's would be;
- each partition's head row ends at its last event.

All of it is one transaction, under an advisory lock and the events table's EXCLUSIVE lock
(the lock the old release's saves took; a partitioned save's insert waits for it too): two
processes starting at once place the events once, a save waits until the events before it are
placed, and a failure leaves the ledger as it was. Running it again finds nothing left to
place (one probe of the index of unplaced events): it is idempotent, and cheap at every start.
An event whose aggregate names no user (never written by this ledger) goes to partition 0.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from psycopg.sql import SQL, Composed, Identifier

from domain.ledger.persistence import reads
from domain.ledger.persistence.partitions import HEADS
from domain.ledger.persistence.reads import Connections, render
from domain.ledger.persistence.sealed_state import clear_json

__all__ = ["place", "unplaced"]

_log = logging.getLogger(__name__)
_OWNERS = "memledger_upgrade_owners"
_USERS = "memledger_upgrade_users"


def _table(schema: str, name: str) -> Composed:
    return SQL("{}.{}").format(Identifier(schema), Identifier(name))


def _lock_id(schema: str) -> int:
    """The advisory lock of the upgrade of this schema's ledger."""
    digest = hashlib.sha256(f"memledger/{schema}/ledger-upgrade".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def unplaced(datastore: Connections, events: str) -> bool:
    """Whether some event has no partition yet (a probe of the partial index on them)."""
    statement = SQL("SELECT 1 AS found FROM {} WHERE partition IS NULL LIMIT 1").format(
        _table(datastore.schema, events)
    )
    return reads.fetch_one(datastore, render(statement)) is not None


def place(datastore: Connections, events: str, partition_of: Callable[[str], int]) -> int:
    """Give every event without a partition its partition, position and recorded time (see
    the module's docstring); how many were placed (0: nothing was left)."""
    if not unplaced(datastore, events):
        return 0
    schema = datastore.schema
    table, heads = _table(schema, events), _table(schema, HEADS)
    owners, users = Identifier(_OWNERS), Identifier(_USERS)
    with datastore.get_connection() as conn, conn.transaction():
        # Waits as long as another process's upgrade (or the saves in flight) take.
        conn.execute("SELECT set_config('lock_timeout', '0', true)", prepare=False)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_id(schema),), prepare=False)
        conn.execute(SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table), prepare=False)
        # Each unplaced aggregate's user, from the clear part of its first event.
        conn.execute(
            SQL(
                "CREATE TEMPORARY TABLE {0} ON COMMIT DROP AS"
                " SELECT o.originator_id, (SELECT {1} ->> 'user_id' FROM {2} AS f"
                " WHERE f.originator_id = o.originator_id ORDER BY f.originator_version LIMIT 1)"
                " AS user_id FROM (SELECT DISTINCT originator_id FROM {2}"
                " WHERE partition IS NULL) AS o"
            ).format(owners, clear_json(SQL("f.state")), table),
            prepare=False,
        )
        rows: list[Any] = conn.execute(
            SQL("SELECT DISTINCT user_id FROM {} WHERE user_id IS NOT NULL").format(owners),
            prepare=False,
        ).fetchall()
        names = [str(row["user_id"]) for row in rows]
        ownerless = conn.execute(
            SQL("SELECT count(*) AS n FROM {} WHERE user_id IS NULL").format(owners),
            prepare=False,
        ).fetchone()
        if ownerless is not None and ownerless["n"]:
            _log.warning("ledger upgrade: %s aggregates name no user: partition 0", ownerless["n"])
        conn.execute(
            SQL(
                "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT * FROM"
                " unnest(%s::text[], %s::int[]) AS u(user_id, partition)"
            ).format(users),
            (names, [partition_of(name) for name in names]),
            prepare=False,
        )
        # None left when another process placed them while this one waited: nothing moves.
        placed = conn.execute(_place(table, heads, owners, users), prepare=False).fetchone()
    count = int(placed["placed"]) if placed is not None else 0
    if count:
        _log.info("ledger upgrade: %s events placed in their users' partitions", count)
    return count


def _place(table: Composed, heads: Composed, owners: Identifier, users: Identifier) -> Composed:
    """One statement: the unplaced events numbered after their partition's head, in the old
    order, then the heads moved to their partition's last event; returns how many."""
    timestamp = clear_json(SQL("e.state"))
    return SQL(
        "WITH numbered AS ("
        " SELECT e.notification_id, h.partition,"
        " h.position + row_number() OVER w AS position,"
        " greatest(h.recorded_at, max(coalesce(({0} -> 'timestamp' ->> '_data_')::timestamptz,"
        " '-infinity')) OVER w) AS recorded_at"
        " FROM {1} AS e JOIN {3} AS o USING (originator_id)"
        " LEFT JOIN {4} AS u USING (user_id)"
        " JOIN {2} AS h ON h.partition = coalesce(u.partition, 0)"
        " WHERE e.partition IS NULL"
        " WINDOW w AS (PARTITION BY h.partition ORDER BY e.notification_id)),"
        " placed AS (UPDATE {1} AS e SET partition = n.partition, position = n.position,"
        " recorded_at = n.recorded_at FROM numbered AS n"
        " WHERE e.notification_id = n.notification_id"
        " RETURNING e.partition, e.position, e.recorded_at),"
        " moved AS (UPDATE {2} AS h SET position = p.position, recorded_at = p.recorded_at"
        " FROM (SELECT partition, max(position) AS position, max(recorded_at) AS recorded_at"
        " FROM placed GROUP BY partition) AS p WHERE h.partition = p.partition RETURNING 1)"
        " SELECT (SELECT count(*) FROM placed) AS placed, (SELECT count(*) FROM moved) AS heads"
    ).format(timestamp, table, heads, owners, users)
