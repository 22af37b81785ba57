"""Catching projections up with the ledger: a partition's events read in batches, each batch
decoded once and applied to every projection behind it in a short transaction of its own
(projections/applying.py), until the partitions' heads, a stop or the caller's deadline.

`ProjectionWorker` (projections/worker.py) runs it live and on demand (`catch_up`,
`backfill`); what it shares with the worker (the projections set aside, the positions committed
for read-your-writes, the stop) it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from projections.applying import SetAside, apply_batch, set_aside
from projections.base import Projection
from projections.envelope import Envelope, decode_batch
from projections.progress import Progress
from projections.tracking import Tables

__all__ = ["PROBE_LOCK_TIMEOUT", "CatchUp"]

_log = logging.getLogger(__name__)

PROBE_LOCK_TIMEOUT = 0.1
"""Seconds a projection held back by a lock waits for it when retried: still locked, it costs
the others (applied before it) next to nothing."""


class CatchUp:
    """Applies what the projections lack: `run` the ledger's new events, `backfill` what the
    projections could not compute, catching up between steps.

    `positions()` reads each (projection, partition)'s stored position. A projection whose
    transaction waits past `lock_timeout` for a lock (or times out) is held back in `aside`
    and retried later, first with a short lock timeout; `progress` hears of every commit.
    """

    def __init__(
        self,
        ledger: MemoryLedger,
        pool: ConnectionPool[Any],
        tables: Tables,
        projections: Sequence[Projection],
        positions: Callable[[], dict[tuple[str, int], int]],
        *,
        batch_size: int,
        lock_timeout: float,
        aside: SetAside,
        progress: Progress,
        stop: threading.Event,
    ) -> None:
        self.ledger, self.pool, self.tables = ledger, pool, tables
        self.projections = projections  # the worker's own list
        self.positions = positions
        self.batch_size = batch_size
        self.lock_timeout = lock_timeout
        self.aside, self.progress, self.stop = aside, progress, stop
        self.cut = False
        """The last run stopped at its deadline, not caught up."""
        self._unread: dict[int, int] = {}  # partition -> the position reported unreadable after

    def run(
        self,
        owned: Sequence[Projection] | None = None,
        *,
        interruptible: bool = False,
        partitions: Collection[int] | None = None,
        until: float | None = None,
    ) -> int:
        """Apply every event not yet applied (in `partitions` only, if given: those this
        worker holds); returns how many ledger events were read.

        `interruptible` (the live loop) stops between batches once stop() was called, or once
        `until` (a monotonic time) passed: the loop then renews its leases and goes on.
        """
        runnable = [p for p in (owned or self.projections) if self.aside.may_run(p.name)]
        recorder = self.ledger.recorder
        read = 0
        self.cut = False
        while runnable and not (interruptible and self._interrupted(until)):
            heads: dict[int, int] = recorder.heads()  # type: ignore[attr-defined]
            if partitions is not None:
                heads = {p: head for p, head in heads.items() if p in partitions}
            positions = self.positions()
            progressed = False
            for partition, head in heads.items():
                behind = [p for p in runnable if positions.get((p.name, partition), 0) < head]
                if not behind:
                    continue
                start = min(positions.get((p.name, partition), 0) for p in behind)
                notes = recorder.read_partition(  # type: ignore[attr-defined]
                    partition, start, self.batch_size
                )
                if not notes:
                    self._report_unread(partition, start, head)
                    continue
                self._unread.pop(partition, None)
                batch = decode_batch(self.ledger.mapper, notes)
                read += len(batch)
                progressed = True
                runnable = self._apply(runnable, batch, positions)
                self.progress.moved()
                if not runnable or (interruptible and self._interrupted(until)):
                    break
            if not progressed:
                break
        return read

    def _report_unread(self, partition: int, after: int, head: int) -> None:
        """The partition's head is past `after` but reading after it found nothing: its
        projections cannot move (a read routed to a stale place, on a cluster). Logged once
        for each position it stays stuck at, so that a stall says where it is."""
        if self._unread.get(partition) == after:
            return
        self._unread[partition] = after
        _log.warning(
            "partition %s: its head is at %s but no event after %s could be read;"
            " its projections wait (retried every turn)",
            partition,
            head,
            after,
        )

    def _interrupted(self, until: float | None) -> bool:
        if self.stop.is_set():
            return True
        if until is not None and time.monotonic() >= until:
            self.cut = True
            return True
        return False

    def _apply(
        self,
        projections: list[Projection],
        batch: list[Envelope],
        positions: dict[tuple[str, int], int],
    ) -> list[Projection]:
        """Apply a batch to the projections, each in its own transaction; returns those that
        are not set aside (those already past it included).

        Those held back lately go last, with a short lock timeout. OperationalError (the
        database is unwell) propagates: the supervisor backs off and reconnects.
        """
        partition, last = batch[-1].partition, batch[-1].local
        behind = [p for p in projections if positions.get((p.name, partition), 0) < last]
        held = self.aside.held
        behind.sort(key=lambda p: p.name in held)  # stable: the others in their order
        timeouts = {
            p.name: PROBE_LOCK_TIMEOUT if p.name in held else self.lock_timeout for p in behind
        }

        def committed(projection: Projection) -> None:
            self.aside.done(projection.name)
            self.progress.committed(projection.name, partition, last)

        with self.pool.connection() as conn:
            applied = apply_batch(
                conn, behind, self.tables, batch, lock_timeouts=timeouts, committed=committed
            )
        for projection, error in applied.held:
            self.aside.hold_back(projection.name, error)
        for projection, error in applied.failed:
            self.aside.failed(projection.name, error)
        aside = {p.name for p, _ in applied.held + applied.failed}
        return [p for p in projections if p.name not in aside]

    def backfill(
        self,
        owned: Sequence[Projection] | None = None,
        *,
        interruptible: bool = False,
        partitions: Collection[int] | None = None,
        until: float | None = None,
    ) -> int:
        """Let the projections fill in what they could not compute, catching up between steps
        (a forget behind a long backfill is applied after one step); returns the steps' total.
        A backfill fills rows of every partition: the live loop runs it in one member of the
        group (the holder of partition 0), catching up its own partitions between steps.
        """
        projections = list(owned or self.projections)
        total = 0
        while not (interruptible and self._interrupted(until)):
            done = 0
            for projection in projections:
                if not self.aside.may_run(projection.name):
                    continue
                with self.pool.connection() as conn:
                    try:
                        done += projection.backfill(conn, self.tables)
                    except Exception as error:
                        verdict = set_aside(error, conn)
                        if verdict is None:
                            raise
                        self.aside.set_aside(verdict, projection.name, error)
            if not done:
                return total
            total += done
            self.run(projections, interruptible=interruptible, partitions=partitions, until=until)
        return total
