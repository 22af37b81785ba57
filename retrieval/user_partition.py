"""Where a projection stands in one user's ledger partition, in SQL, for the search caches.

A projection's tracking row per partition holds the partition's own position
(projections/tracking.py), and positions only order events within a partition
(domain/ledger/positions.py), so a cache comparing two projections for a user compares them in
the user's partition. The read side cannot hash a user id into a partition (that takes the
ledger's key), but every projected row of a user carries the packed position of the event that
last changed it, and a user's events all live in one partition: any of their rows names it.
The statements here select that partition as `one.part` and the tracked positions packed, so
they compare with the rows' `position`.

A user with no row has no partition to name: `tracked` answers NULL there, which the callers
read as "rows may be behind the revision" (nothing read then is cached).
"""

from __future__ import annotations

from psycopg.sql import SQL, Composed, Literal

from domain.ledger.positions import MAX_PARTITIONS, PARTITION_BITS
from projections.tracking import TRACKING, Tables

__all__ = ["partition_source", "tracked"]


def partition_source(t: Tables, rows: str) -> Composed:
    """`(SELECT <the user's partition> AS part) one`, from the user's rows in table `rows`
    (`%(user)s` names the user)."""
    return SQL(
        "(SELECT (SELECT position & {mask} FROM {rows} WHERE user_id = %(user)s"
        " AND position IS NOT NULL LIMIT 1) AS part) one"
    ).format(mask=Literal(MAX_PARTITIONS - 1), rows=t[rows])


def tracked(t: Tables, projection: str) -> Composed:
    """The projection's packed position in the partition `one.part` (NULL: none there)."""
    return SQL(
        "(SELECT (position << {bits}) | partition FROM {p}"
        " WHERE projection = {name} AND partition = one.part)"
    ).format(bits=Literal(PARTITION_BITS), p=t[TRACKING], name=Literal(projection))
