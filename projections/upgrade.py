"""The projections of a ledger partitioned in place (issue 26: the upgrade from the release
before partitions).

That release tracked one global position per projection (`memledger_projection_positions`:
the last notification id it applied). Once the ledger has placed those events in partitions
(domain/ledger/persistence/upgrade.py, when the ledger starts), `translate`, in one
transaction:

- gives each projection, in each partition, the position of the partition's last event at or
  before its old global position: the very events it had applied, so it goes on from there
  and projects nothing again;
- rewrites the positions held in the rows of the projections that keep any
  (`Projection.stores_positions`: audit rows, profile changes, the last change of a memory
  row), from the old global id to the same event's position now: the rows a fresh projection
  would hold, without projecting anything again;
- moves the quarantined events to their new positions;
- drops the old tracking table.

Run again, or by a second process, it finds no old table and does nothing. Before the ledger
has placed its events (no ledger started yet on the new release) it refuses: the positions
to translate into do not exist yet.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from psycopg import Connection
from psycopg.sql import SQL, Composed, Identifier, Literal

from domain.ledger.persistence.partitions import HEADS
from domain.ledger.positions import MAX_PARTITIONS
from projections.quarantine import QUARANTINE
from projections.registry import all_projections
from projections.tracking import LEGACY_TRACKING, TRACKING, Tables

__all__ = ["EVENTS", "LedgerNotPartitioned", "translate"]

EVENTS: Final = "events"
"""The ledger's events table, by its logical name: the library names it after the
application (`MemoryLedger.name`), `memledger_events`."""
_log = logging.getLogger(__name__)


class LedgerNotPartitioned(RuntimeError):
    """Projections tracked before partitions, over a ledger not partitioned yet."""


def translate(conn: Connection[Any], t: Tables) -> list[str]:
    """Translate the old tracking and positions (see the module's docstring), inside the
    caller's transaction; the names of the projections whose rows' positions it rewrote ([]
    when there was nothing to translate)."""
    if not _exists(conn, t.name(LEGACY_TRACKING), t.schema):
        return []
    if not _partitioned(conn, t):
        raise LedgerNotPartitioned(
            "the projections were tracked before the ledger had partitions, and the ledger's"
            " events are not placed in partitions yet: start the ledger of this release first"
            " (any memledger command, or serve), then the projections"
        )
    legacy, events, tracking = t[LEGACY_TRACKING], t[EVENTS], t[TRACKING]
    # Per (projection, partition): the partition's events walked back from its head (its
    # position index) to the first at or before the old position; notification ids grow with
    # positions inside a partition, so that is its last one there. A few rows each when the
    # projections had caught up, whatever the ledger's size.
    conn.execute(
        SQL(
            "INSERT INTO {0} AS k (projection, partition, position)"
            " SELECT l.projection, h.partition, x.position FROM {1} AS l CROSS JOIN {3} AS h"
            " CROSS JOIN LATERAL (SELECT e.position FROM {2} AS e"
            " WHERE e.partition = h.partition AND e.notification_id <= l.position"
            " ORDER BY e.position DESC LIMIT 1) AS x"
            " ON CONFLICT (projection, partition)"
            " DO UPDATE SET position = greatest(k.position, EXCLUDED.position)"
        ).format(
            tracking, legacy, events, SQL("{}.{}").format(Identifier(t.schema), Identifier(HEADS))
        )
    )
    rewritten = []
    for projection in all_projections():
        if projection.stores_positions:
            for name in projection.tables:
                if _has_position(conn, t, name):
                    for statement in _moved(t, name):
                        conn.execute(statement)
            rewritten.append(projection.name)
    for statement in _moved(t, QUARANTINE):
        conn.execute(statement)
    conn.execute(SQL("DROP TABLE {}").format(legacy))
    _log.warning(
        "ledger upgrade: projection positions translated to partitions, and the positions"
        " held in the rows of %s",
        ", ".join(rewritten),
    )
    return rewritten


def _moved(t: Tables, logical: str) -> list[Composed]:
    """A table's `position`s moved from old global ids to their events' positions (negated
    first: no old and new position of two rows ever meet in a primary key)."""
    table = t[logical]
    return [
        SQL("UPDATE {} SET position = -position WHERE position > 0").format(table),
        SQL(
            "UPDATE {0} AS v SET position = e.position * {2} + e.partition FROM {1} AS e"
            " WHERE e.notification_id = -v.position AND v.position < 0"
        ).format(table, t[EVENTS], Literal(MAX_PARTITIONS)),
    ]


def _has_position(conn: Connection[Any], t: Tables, logical: str) -> bool:
    row = conn.execute(
        SQL(
            "SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'position'"
            " AND NOT a.attisdropped"
        ),
        (t.schema, t.name(logical)),
    ).fetchone()
    return row is not None


def _exists(conn: Connection[Any], name: str, schema: str) -> bool:
    row = conn.execute(
        SQL(
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'r'"
        ),
        (schema, name),
    ).fetchone()
    return row is not None


def _partitioned(conn: Connection[Any], t: Tables) -> bool:
    """Whether the ledger's events all have a partition (the column there, none without)."""
    row = conn.execute(
        SQL(
            "SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'partition'"
            " AND NOT a.attisdropped"
        ),
        (t.schema, t.name(EVENTS)),
    ).fetchone()
    if row is None:
        return False
    unplaced = SQL("SELECT 1 FROM {} WHERE partition IS NULL LIMIT 1").format(t[EVENTS])
    return conn.execute(unplaced).fetchone() is None
