"""Rebuild projections from the ledger into fresh tables, check them, and swap them in live.

The service keeps serving meanwhile: the fresh tables are filled from position 0 outside any
lock; then, per projection, one transaction locks its tracking row (the live worker waits),
brings both table sets to the same position, compares them row for row, drops the live
tables and renames the fresh ones (and their indexes) into place.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection
from psycopg.sql import SQL, Identifier
from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from projections.base import Projection
from projections.envelope import Envelope, decode_batch
from projections.tables import Tables
from projections.tracking import locked_position, set_position

__all__ = ["RebuildReport", "rebuild"]


@dataclass
class RebuildReport:
    """What a rebuild did: events replayed, time taken, and rows that differed from live."""

    events: int = 0
    seconds: float = 0.0
    differences: dict[str, int] = field(default_factory=dict)

    @property
    def events_per_second(self) -> float:
        """Replay throughput of all projections together."""
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def identical(self) -> bool:
        """True when every rebuilt table equalled its live table at the same position."""
        return not any(self.differences.values())


def _replay(
    ledger: MemoryLedger,
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    after: int,
    upto: int,
    batch_size: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Apply events (after, upto] to the tables named by `t`; returns how many."""
    done, start = 0, after + 1
    while start <= upto:
        notes = ledger.recorder.select_notifications(start, batch_size, stop=upto)
        if not notes:
            break
        batch: list[Envelope] = decode_batch(ledger.mapper, notes)
        with conn.transaction(), conn.cursor() as cur:
            for projection in projections:
                projection.apply(cur, t, batch)
        done += len(batch)
        start = batch[-1].position + 1
        if progress is not None:
            progress(len(batch))
    return done


def _differences(conn: Connection[Any], live: Tables, fresh: Tables, logical: str) -> int:
    query = SQL(
        "SELECT (SELECT count(*) FROM (TABLE {0} EXCEPT ALL TABLE {1}) a)"
        " + (SELECT count(*) FROM (TABLE {1} EXCEPT ALL TABLE {0}) b)"
    ).format(live[logical], fresh[logical])
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0


def _swap(conn: Connection[Any], live: Tables, fresh: Tables, logical: str) -> None:
    conn.execute(SQL("DROP TABLE {}").format(live[logical]))
    conn.execute(
        SQL("ALTER TABLE {} RENAME TO {}").format(fresh[logical], Identifier(live.name(logical)))
    )
    indexes = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
        (live.schema, live.name(logical)),
    ).fetchall()
    for (index,) in indexes:
        renamed = index.replace(fresh.name(logical), live.name(logical), 1)
        if renamed != index:
            conn.execute(
                SQL("ALTER INDEX {}.{} RENAME TO {}").format(
                    Identifier(live.schema), Identifier(index), Identifier(renamed)
                )
            )


def rebuild(
    ledger: MemoryLedger,
    pool: ConnectionPool[Any],
    schema: str,
    projections: Sequence[Projection],
    *,
    batch_size: int = 2000,
    progress: Callable[[int], None] | None = None,
) -> RebuildReport:
    """Rebuild the given projections from position 0 and swap them in atomically."""
    live, fresh = Tables(schema), Tables(schema, f"__r{secrets.token_hex(4)}")
    report = RebuildReport()
    started = time.perf_counter()
    with pool.connection() as conn:
        try:
            with conn.transaction():
                for projection in projections:
                    for statement in projection.create(fresh):
                        conn.execute(statement)
            head = ledger.position()
            report.events = _replay(ledger, conn, projections, fresh, 0, head, batch_size, progress)
            report.seconds = time.perf_counter() - started
            for projection in projections:
                with conn.transaction(), conn.cursor() as cur:
                    position = locked_position(cur, live, projection.name)
                    if position > head:  # the live worker moved on: bring fresh tables along
                        _replay(ledger, conn, [projection], fresh, head, position, batch_size, None)
                    elif position < head:  # the live tables lag: bring them to `head` first
                        _replay(ledger, conn, [projection], live, position, head, batch_size, None)
                        set_position(cur, live, projection.name, head)
                    for logical in projection.tables:
                        report.differences[logical] = _differences(conn, live, fresh, logical)
                        _swap(conn, live, fresh, logical)
        finally:
            with conn.transaction():
                for projection in projections:
                    for logical in projection.tables:
                        conn.execute(SQL("DROP TABLE IF EXISTS {}").format(fresh[logical]))
    return report
