"""Rebuild projections from the ledger into fresh tables, check them, and swap them in live.

The service keeps serving meanwhile: the fresh tables are filled outside any lock with every
partition's events up to its head when the rebuild started; then, per projection, one
transaction locks its tracking rows of every partition (the live workers wait), brings both
table sets to the same position in each partition, compares them row for row, drops the live
tables and renames the fresh ones (and their indexes) into place.

Filling runs in several forked processes, each over a share of the partitions
(projections/rebuild/processes.py), when every projection allows it; else in this process,
pipelined, one partition after another (projections/rebuild/lanes.py). Secondary indexes are
built once the tables are full.

An event a projection cannot apply is quarantined as the live worker does
(projections/quarantine.py), into the fresh run's own quarantine table; at the swap it
replaces the projection's live quarantine (the report counts the entries that differed).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection, Cursor
from psycopg.errors import LockNotAvailable
from psycopg.sql import SQL, Identifier
from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from projections.applying import BATCH
from projections.base import Projection
from projections.quarantine import QUARANTINE, copy_quarantine, create_quarantine
from projections.rebuild.distributed import distribute_like_live
from projections.rebuild.lanes import (
    Fill,
    apply,
    build_indexes,
    deferred_indexes,
    fill_lanes,
    rare_collections,
)
from projections.rebuild.leftovers import claimed, drop_leftovers, new_suffix
from projections.rebuild.processes import can_partition, fill_partitioned
from projections.rebuild.reading import ReadAhead, Span, heads, ledger_reader, spans
from projections.sealed import TERM_MEMO, registered
from projections.tracking import Tables, locked_position, set_lock_timeout, set_position

__all__ = ["PROCESSES", "SWAP_ATTEMPTS", "RebuildReport", "rebuild"]

PROCESSES = 2
"""Processes filling the fresh tables by default (one per core of the machine measured)."""
SWAP_ATTEMPTS = 5
"""Tries of a projection's swap whose live tables stay locked past the lock timeout."""

_log = logging.getLogger(__name__)


@dataclass
class RebuildReport:
    """What a rebuild did: events replayed, time taken, and rows that differed from live."""

    events: int = 0
    seconds: float = 0.0
    """Filling the fresh tables (events/s is measured on it)."""
    check_seconds: float = 0.0
    """Bringing both table sets to one position, comparing them row for row, swapping."""
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
    missing: Sequence[Span],
    batch_size: int,
) -> int:
    """Apply the events of the `missing` spans to the tables named by `t`; returns how many.

    Batches are applied in each partition's order, each once, each in a savepoint of the
    transaction `conn` is in (the swap's).
    """
    if not missing:
        return 0  # the usual case at a swap: no reader thread to start
    done = 0
    with (
        rare_collections(),
        ReadAhead(ledger_reader(ledger), ledger.mapper, missing, batch_size) as batches,
    ):
        for batch in batches:
            apply(conn, projections, t, batch)
            done += len(batch)
    return done


def _fill(
    ledger: MemoryLedger,
    pool: ConnectionPool[Any],
    conn: Connection[Any],
    fill: Fill,
    progress: Callable[[int], None] | None,
    processes: int,
) -> int:
    """Create the fresh tables and fill them with `fill`'s events; returns how many.

    In `processes` forked processes when the projections allow it, else in this one. The
    fresh tables are nobody's but this rebuild's until the swap, so their commits need not
    wait for the disk (a crash loses the rebuild, never live data).
    """
    kwargs = {**pool.kwargs, "autocommit": True}

    def connect() -> Connection[Any]:
        return Connection.connect(pool.conninfo, **kwargs)

    indexes = deferred_indexes(conn, fill.projections, fill.t)
    if processes > 1 and can_partition(ledger, fill.projections):
        done = fill_partitioned(ledger, pool.conninfo, kwargs, fill, progress, processes)
        build_indexes(conn, connect, indexes)
        return done
    read = ledger_reader(ledger)
    return fill_lanes(read, ledger.mapper, conn, connect, fill, progress, indexes)


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
    batch_size: int = BATCH,
    progress: Callable[[int], None] | None = None,
    processes: int = PROCESSES,
    lock_timeout: float = 5.0,
) -> RebuildReport:
    """Rebuild the given projections from the ledger's start and swap them in atomically.

    `processes` fill the fresh tables (1: this process alone; see processes.py). The views
    are sealed with `ledger`'s key store during the rebuild only. Each swap waits at most
    `lock_timeout` for a lock, and is tried again (SWAP_ATTEMPTS). The tables of rebuilds
    killed before are dropped first (projections/rebuild/leftovers.py).
    """
    with registered(schema, ledger.mapper.keys, memo=TERM_MEMO):
        return _rebuild(
            ledger, pool, schema, projections, batch_size, progress, processes, lock_timeout
        )


def _rebuild(
    ledger: MemoryLedger,
    pool: ConnectionPool[Any],
    schema: str,
    projections: Sequence[Projection],
    batch_size: int,
    progress: Callable[[int], None] | None,
    processes: int,
    lock_timeout: float,
) -> RebuildReport:
    live, fresh = Tables(schema), Tables(schema, new_suffix())
    report = RebuildReport()
    started = time.perf_counter()
    with pool.connection() as conn, claimed(conn, schema, fresh.suffix):
        drop_leftovers(conn, schema, lock_timeout)  # of rebuilds killed before this one
        with conn.transaction():  # where both runs set aside what they cannot apply
            for statement in [*create_quarantine(live), *create_quarantine(fresh)]:
                conn.execute(statement)
            distribute_like_live(conn, live, fresh, [QUARANTINE])
        try:
            head = heads(ledger)
            fill = Fill(projections, fresh, head, batch_size)
            report.events = _fill(ledger, pool, conn, fill, progress, processes)
            report.seconds = time.perf_counter() - started
            for projection in projections:
                swap = functools.partial(_check_and_swap, ledger, conn, projection, report)
                _retried(conn, lock_timeout, projection.name, swap, live, fresh, head, batch_size)
            report.check_seconds = time.perf_counter() - started - report.seconds
        finally:
            with conn.transaction():
                set_lock_timeout(conn, lock_timeout)  # else left to the next start or rebuild
                for logical in [*(n for p in projections for n in p.tables), QUARANTINE]:
                    conn.execute(SQL("DROP TABLE IF EXISTS {}").format(fresh[logical]))
    return report


def _retried(
    conn: Connection[Any],
    lock_timeout: float,
    name: str,
    swap: Callable[..., None],
    *args: Any,
) -> None:
    """`swap(*args)` in a transaction under the lock timeout (its DROP TABLE waits for the
    readers of the live table, and every reader after it queues behind it): tried again
    while a table stays locked, SWAP_ATTEMPTS times at most."""
    for attempt in range(1, SWAP_ATTEMPTS + 1):
        try:
            with conn.transaction():
                set_lock_timeout(conn, lock_timeout)
                swap(*args)
            return
        except LockNotAvailable:
            _log.warning(
                "rebuild of %s: a table stayed locked for %.1fs (attempt %s of %s)",
                name,
                lock_timeout,
                attempt,
                SWAP_ATTEMPTS,
            )
            time.sleep(min(5.0, 0.5 * attempt))
    raise RuntimeError(
        f"rebuild of {name}: its live tables stayed locked by another session; the live"
        " tables are unchanged, rebuild again later"
    )


def _check_and_swap(
    ledger: MemoryLedger,
    conn: Connection[Any],
    projection: Projection,
    report: RebuildReport,
    live: Tables,
    fresh: Tables,
    head: Mapping[int, int],
    batch_size: int,
) -> None:
    """Bring both table sets of `projection` to one position in every partition (its
    tracking rows locked: the live workers wait), compare them row for row, swap the fresh
    ones in.

    In each partition, whichever set lags is brought to the other's position: the fresh
    tables where a live worker moved past the rebuild's head, the live ones where they had
    not reached it (their tracking then moves to the head).
    """
    with conn.cursor() as cur:
        position = _locked_positions(cur, live, projection.name, head)
        reached = {p: max(position[p], head.get(p, 0)) for p in position}
        _replay(ledger, conn, [projection], fresh, spans(reached, head), batch_size)
        _replay(ledger, conn, [projection], live, spans(reached, position), batch_size)
        for partition, local in sorted(reached.items()):
            if local != position[partition]:
                set_position(cur, live, projection.name, partition, local)
        for logical in projection.tables:
            report.differences[logical] = _differences(conn, live, fresh, logical)
            _swap(conn, live, fresh, logical)
        report.differences[f"quarantine/{projection.name}"] = copy_quarantine(
            conn, fresh, live, projection.name
        )


def _locked_positions(
    cur: Cursor[Any], live: Tables, name: str, head: Mapping[int, int]
) -> dict[int, int]:
    """The projection's live position in every partition, each tracking row locked (in
    partition order, as every rebuild takes them)."""
    return {partition: locked_position(cur, live, name, partition) for partition in sorted(head)}
