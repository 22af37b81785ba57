"""Per-user memory revision: advances on every change to a user's memories (cache keys)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.tracking import Tables
from projections.views._rows import ReadSource

__all__ = ["UserRevisions", "user_revision"]


class UserRevisions(Projection):
    """A counter per user; any cached search result keyed by an older value is stale."""

    name = "user_revisions"

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " user_id text NOT NULL,"
                " revision bigint NOT NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, user_id))"
            ).format(t["user_revisions"])
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        changes = Counter(e.event.user_id for e in batch if isinstance(e.event, Memory.Event))
        if changes:
            users, counts = zip(*sorted(changes.items()), strict=True)
            cur.execute(
                SQL(
                    "INSERT INTO {0} AS r (user_id, revision, partition)"
                    " SELECT u, n, %s::int FROM unnest(%b::text[], %b::int8[]) AS v(u, n)"
                    " ON CONFLICT (partition, user_id)"
                    " DO UPDATE SET revision = r.revision + EXCLUDED.revision"
                ).format(t["user_revisions"]),
                (batch[0].partition, list(users), list(counts)),
            )


def user_revision(src: ReadSource, user_id: str) -> int:
    """The user's memory revision (0 before any memory event)."""
    rows = src.all(
        SQL("SELECT revision FROM {} WHERE partition = %s AND user_id = %s").format(
            src.t["user_revisions"]
        ),
        (src.partition(user_id), user_id),
    )
    return int(rows[0]["revision"]) if rows else 0
