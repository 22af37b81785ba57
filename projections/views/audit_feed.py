"""The audit trail as auditors page through it: every partition's rows, merged by time.

The audit_log rows of one ledger event are followed by the profile changes it caused (same
position, `seq` > 0, from the profile projection). Within a partition rows come in position
order; partitions are merged by the events' time (`occurred_at`), each partition's rows
staying in their order. The cursor is where each partition was left (`marks`: partition ->
position within it): rows are projected partition by partition, so a partition lagging behind
another loses nothing, its rows come with a later page.

A page never splits one position's rows: when the next position's rows would pass `limit`,
it is left for the next page, unless the page would otherwise be empty (then all of its rows
come, a few more than `limit`).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.sql import SQL, Composed

from domain.ledger.positions import local_of, pack, partition_of
from projections.views._rows import ReadSource
from projections.views.audit_log import MAX_CHANGES
from projections.views.profile_changes import TABLE as PROFILE_CHANGES

__all__ = ["page"]

_EARLIEST = float("-inf")

Group = list[dict[str, Any]]
"""The rows of one position: its event's, then the profile changes it caused."""


def page(
    src: ReadSource,
    *,
    marks: Mapping[int, int],
    partitions: Sequence[int],
    limit: int,
    user_id: str | None = None,
    memory_id: UUID | None = None,
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Rows after the marks in these partitions, at most about `limit`; and the marks after
    them (partitions not read keep theirs)."""
    per_partition = limit + MAX_CHANGES + 1
    query = _query(src, user_id, memory_id)
    # One statement per partition (sent together: `each`). It used to be one statement, a
    # LATERAL join of the partitions' marks with both tables: Citus refuses a correlated
    # subquery on distributed tables that is not joined on the distribution column
    # (tests/citus/test_projection_statements.py); each of these runs on one shard.
    found = src.each(
        [
            (query, _params(p, pack(p, marks.get(p, 0)), user_id, memory_id, per_partition))
            for p in partitions
        ]
    )
    groups = _groups([row for rows in found for row in rows], per_partition)
    chosen: list[dict[str, Any]] = []
    moved = dict(marks)
    for group in heapq.merge(*groups.values(), key=_when):
        if chosen and len(chosen) + len(group) > limit:
            break
        chosen.extend(group)
        position = group[0]["position"]
        moved[partition_of(position)] = local_of(position)
    for row in chosen:
        del row["seq"]
    return chosen, moved


def _query(src: ReadSource, user_id: str | None, memory_id: UUID | None) -> Composed:
    condition = SQL(" AND ").join(
        [
            SQL("partition = %(part)s AND position > %(after)s"),
            *([SQL("user_id = %(user)s")] if user_id is not None else []),
            *([SQL("memory_id = %(memory)s")] if memory_id is not None else []),
        ]
    )
    return SQL(
        "SELECT * FROM ("
        "SELECT position, 0 AS seq, event_id, event_type, memory_id, user_id, scope_type,"
        " workspace_type, revision, content_hash, occurred_at, request_id FROM {audit}"
        " WHERE {condition}"
        " UNION ALL SELECT position, seq, event_id, event_type, memory_id, user_id,"
        " scope_type, workspace_type, revision, NULL, occurred_at, request_id FROM {changes}"
        " WHERE {condition}) AS u ORDER BY position, seq LIMIT %(limit)s"
    ).format(audit=src.t["audit_log"], changes=src.t[PROFILE_CHANGES], condition=condition)


def _params(
    partition: int,
    after: int,
    user_id: str | None,
    memory_id: UUID | None,
    limit: int,
) -> dict[str, Any]:
    return {
        "part": partition,
        "after": after,
        "user": user_id,
        "memory": memory_id,
        "limit": limit,
    }


def _groups(
    rows: list[dict[str, Any]], per_partition: int
) -> dict[int, list[list[dict[str, Any]]]]:
    """Each partition's rows as one list per position, in order; a partition's last position
    is dropped when its rows may have been cut by the per-partition limit (unless it is the
    partition's only one, which the limit always holds whole)."""
    found: dict[int, list[Group]] = {}
    counts: dict[int, int] = {}
    for row in rows:
        part = partition_of(row["position"])
        counts[part] = counts.get(part, 0) + 1
        groups = found.setdefault(part, [])
        if groups and groups[-1][0]["position"] == row["position"]:
            groups[-1].append(row)
        else:
            groups.append([row])
    for part, groups in found.items():
        if counts[part] >= per_partition and len(groups) > 1:
            groups.pop()
    return found


def _when(group: Group) -> tuple[float, int]:
    """The merge order of a position's rows: its event's time, then the position."""
    at: datetime | None = group[0]["occurred_at"]
    return (at.timestamp() if at is not None else _EARLIEST, group[0]["position"])
