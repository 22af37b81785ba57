"""The projection tables of the release before issue 27 given their `partition`, in place.

That release keyed the view tables by their rows' own ids (memory_id, candidate_id, position,
user_id, ...). Now every table holding a user's rows carries the user's ledger partition as
its last column and the first of its primary key (projections/views/_rows.py `PARTITION`),
so that on Citus each is distributed by it. `add_partitions`, inside the caller's
transaction, for each such table that lacks it:

- ADD COLUMN partition int (nullable), at the end: where a fresh table has it;
- fills it: `position & 1023` where the row holds a packed ledger position
  (domain/ledger/positions.py; audit rows, profile changes, the memory rows, the quarantine),
  else from the row's user id with the ledger's own partition of a user (`partition_of`,
  computed here in Python: it is a keyed hash under the ledger's key), through a temporary
  table of the table's users;
- SET NOT NULL, and re-keys the primary key to (partition, <its old columns>);
- the tracking table's key (projection, partition) becomes (partition, projection).

It runs after the positions were translated to partitions (projections/upgrade.py), so every
position is packed. Run again, or by a second process (after the first committed), it finds
every table keyed by partition already and changes nothing: one catalog query.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

from psycopg import Connection
from psycopg.sql import SQL, Identifier, Literal

from domain.ledger.positions import MAX_PARTITIONS
from projections.quarantine import QUARANTINE
from projections.tracking import TRACKING, Tables
from projections.views.embeddings import STAMPS

__all__ = ["MissingPartitionOf", "add_partitions", "logical_tables"]

_log = logging.getLogger(__name__)
_KEYS: Final = SQL(
    "SELECT c.relname, con.conname,"
    " array(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)"
    "  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.n ORDER BY k.i),"
    " EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid"
    "  AND a.attname = 'partition' AND a.attnotnull AND NOT a.attisdropped),"
    " EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid"
    "  AND a.attname = 'position' AND NOT a.attisdropped)"
    " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " LEFT JOIN pg_constraint con ON con.conrelid = c.oid AND con.contype = 'p'"
    " WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind = 'r'"
)


class MissingPartitionOf(RuntimeError):
    """Rows known by user id only, and no way given to tell a user's partition."""


def logical_tables(projection_tables: Iterable[str]) -> list[str]:
    """The logical names of every table holding users' rows that projections keep."""
    return [*projection_tables, STAMPS, QUARANTINE, TRACKING]


def add_partitions(
    conn: Connection[Any],
    t: Tables,
    logical: Iterable[str],
    partition_of: Callable[[str], int] | None,
) -> list[str]:
    """Give the live tables named in `logical` their partition column and key (see the
    module's docstring), inside the caller's transaction; returns the tables it changed.

    Raises MissingPartitionOf when a table's rows must be placed by their users and
    `partition_of` is None.
    """
    names = {t.name(n): n for n in logical}
    changed = []
    for table, key_name, key, has_partition, has_position in conn.execute(
        _KEYS, (t.schema, list(names))
    ).fetchall():
        if has_partition and key and key[0] == "partition":
            continue
        qualified = t[names[table]]
        conn.execute(
            SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS partition int NULL").format(qualified)
        )
        if has_position:
            conn.execute(
                SQL("UPDATE {} SET partition = position & {} WHERE partition IS NULL").format(
                    qualified, Literal(MAX_PARTITIONS - 1)
                )
            )
        else:
            _by_user(conn, qualified, table, partition_of)
        conn.execute(SQL("ALTER TABLE {} ALTER COLUMN partition SET NOT NULL").format(qualified))
        columns = ["partition", *(c for c in key or () if c != "partition")]
        if key_name is not None:
            conn.execute(
                SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(qualified, Identifier(key_name))
            )
        conn.execute(
            SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(
                qualified, SQL(", ").join(map(Identifier, columns))
            )
        )
        changed.append(table)
    if changed:
        _log.warning(
            "projection tables given their users' partitions (issue 27): %s", ", ".join(changed)
        )
    return changed


def _by_user(
    conn: Connection[Any],
    qualified: Any,
    table: str,
    partition_of: Callable[[str], int] | None,
) -> None:
    """Fill `partition` from each row's user (a temporary table of the users' partitions)."""
    users = [
        row[0]
        for row in conn.execute(
            SQL("SELECT DISTINCT user_id FROM {} WHERE partition IS NULL").format(qualified)
        ).fetchall()
    ]
    if not users:
        return
    if partition_of is None:
        raise MissingPartitionOf(
            f"{table}: rows of the release before partitioned views, known by user id only;"
            " their partitions are the ledger's (start the service or worker of this release,"
            " which passes the ledger's partition of a user)"
        )
    conn.execute(
        "CREATE TEMPORARY TABLE IF NOT EXISTS memledger_user_partitions"
        " (user_id text PRIMARY KEY, partition int NOT NULL) ON COMMIT DROP"
    )
    conn.execute("TRUNCATE memledger_user_partitions")
    with conn.cursor().copy(
        "COPY memledger_user_partitions (user_id, partition) FROM STDIN"
    ) as copy:
        for user in users:
            copy.write_row((user, partition_of(user)))
    conn.execute(
        SQL(
            "UPDATE {} AS v SET partition = u.partition FROM memledger_user_partitions u"
            " WHERE v.user_id = u.user_id AND v.partition IS NULL"
        ).format(qualified)
    )
