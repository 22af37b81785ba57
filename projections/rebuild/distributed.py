"""A rebuild's fresh tables distributed like the live ones, on a Citus coordinator.

A rebuild fills tables of its own and swaps them in (projections/rebuild/__init__.py): a
CREATE TABLE on a Citus coordinator makes a table local to it, so the swap would put a local
table where a distributed one was, and every later statement on it would run on the
coordinator alone. So each fresh table whose live table is distributed is distributed the same
way before it is filled: by `partition`, colocated with the live table (and so with the
ledger's events; `memledger cluster distribute` made it so). On a server without Citus, or
with live tables it did not distribute, nothing is done.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg import Connection

from projections.tracking import Tables

__all__ = ["distribute_like_live"]


def distribute_like_live(
    conn: Connection[Any], live: Tables, fresh: Tables, logical: Iterable[str]
) -> list[str]:
    """Distribute (or replicate) each fresh table as its live table is; returns the logical
    names of those it distributed. In the caller's transaction, before any row is written."""
    found = conn.execute("SELECT to_regclass('pg_catalog.pg_dist_partition')").fetchone()
    if found is None or found[0] is None:
        return []  # no Citus here
    done = []
    for name in logical:
        row = conn.execute(
            "SELECT partmethod FROM pg_dist_partition WHERE logicalrelid = to_regclass(%s)",
            (_qualified(live, name),),
        ).fetchone()
        if row is None:
            continue
        if row[0] == "n":  # a reference table (none among the views; kept for completeness)
            conn.execute("SELECT create_reference_table(%s)", (_qualified(fresh, name),))
        else:
            conn.execute(
                "SELECT create_distributed_table(%s, 'partition', colocate_with => %s)",
                (_qualified(fresh, name), _qualified(live, name)),
            )
        done.append(name)
    return done


def _qualified(t: Tables, logical: str) -> str:
    return '"{}"."{}"'.format(t.schema.replace('"', '""'), t.name(logical).replace('"', '""'))
