"""The projection worker: follows the ledger live and keeps every projection caught up."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier
from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import pack
from projections.applying import BATCH, SetAside, set_aside
from projections.base import Projection
from projections.catching_up import CatchUp
from projections.leases import Holder, Leases, holders
from projections.progress import Progress
from projections.quarantine import quarantine_counts
from projections.sealed import register
from projections.startup import ensure_tables
from projections.tracking import Tables, read_positions

__all__ = ["ProjectionStatus", "ProjectionWorker", "ensure_tables"]

_log = logging.getLogger(__name__)

LEASE_INTERVAL = 0.2
"""Seconds between two renewals of a worker's leases, at most (a turn of its loop renews them
when that long passed): what a takeover may take longer than the turns themselves."""


@dataclass(frozen=True, slots=True)
class ProjectionStatus:
    """A projection's position against the ledger's head."""

    name: str
    position: int
    head: int

    @property
    def lag(self) -> int:
        """How many ledger positions it is behind."""
        return max(0, self.head - self.position)


class ProjectionWorker:
    """Keeps projections caught up with the ledger: follows it live, shares its partitions with
    the other workers of its group, and applies their new events in batches (each decoded once,
    then applied to each projection in a short transaction of its own:
    projections/catching_up.py, projections/applying.py).

    Run it in-process (`start()`/`stop()`) or as its own process (`run()`). The workers of one
    `name` (and projections: `group`) over a schema, in any number of processes, share the
    ledger's partitions through leases (projections/leases.py): each applies every projection
    to the partitions it holds, a fair share, and takes over a stopped or killed one's within
    a turn or two of its loop (`idle_wait`, a second at most). Database errors restart the
    loop with exponential back-off; an event a projection cannot apply is
    quarantined and the projection moves on (projections/quarantine.py). A projection that
    cannot make progress holds back only itself: one whose tables stay locked past
    `lock_timeout` (or that times out) is retried soon, after up to `max_restart_wait`, the
    others' batch first and with a short lock timeout; one that cannot run at all is retried
    later, after up to `max_backoff`. Several workers may
    share a process, each over its own projections (`name` names its thread): the embeddings
    projection has one of its own, with small batches, so that slow embedding never holds back
    the others. When caught up, a worker lets its projections `backfill` step by step,
    catching up again between steps.
    """

    def __init__(
        self,
        ledger: MemoryLedger,
        pool: ConnectionPool[Any],
        schema: str,
        projections: Sequence[Projection],
        *,
        batch_size: int = BATCH,
        idle_wait: float = 1.0,
        max_backoff: float = 30.0,
        max_restart_wait: float = 2.0,
        name: str = "projection-worker",
        status_pool: ConnectionPool[Any] | None = None,
        lock_timeout: float = 1.0,
    ) -> None:
        self.ledger = ledger
        self.pool = pool
        self.schema = schema
        self.projections = list(projections)
        self.tables = Tables(schema)
        register(schema, ledger.mapper.keys)
        self.idle_wait = idle_wait
        self.max_backoff = max_backoff
        self.max_restart_wait = max_restart_wait
        self.name = name
        # Where `status()` and `wait()`, called by API requests, read the positions: the
        # API's read pool, so requests never take the connections the worker applies with.
        self.status_pool = status_pool or pool
        self._caught_up = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # What this worker committed, for read-your-writes (`wait`).
        self._progress = Progress(lambda: self.positions(self.status_pool))
        self._aside = SetAside(held_cap=max_restart_wait, failed_cap=max_backoff)
        self._catching = CatchUp(
            ledger,
            pool,
            self.tables,
            self.projections,
            self.positions,
            batch_size=batch_size,
            lock_timeout=lock_timeout,
            aside=self._aside,
            progress=self._progress,
            stop=self._stop,
        )
        self.catch_up = self._catching.run
        """`catch_up(owned=None, *, interruptible=False, partitions=None, until=None)`: apply
        every event not yet applied, returning how many were read (`CatchUp.run`)."""
        self.backfill = self._catching.backfill
        """`backfill(...)`, the same arguments: let the projections fill in what they could not
        compute, catching up between steps (`CatchUp.backfill`)."""
        self.owned: frozenset[int] = frozenset()
        """The partitions this worker's live loop holds now (`run`; empty when not running)."""

    # -- readings and settings ---------------------------------------------------------------

    def positions(self, pool: ConnectionPool[Any] | None = None) -> dict[tuple[str, int], int]:
        """Each (projection, partition)'s position within the partition (missing: 0), read
        through `pool` (the worker's own by default)."""
        names = {p.name for p in self.projections}
        with (pool or self.pool).connection() as conn:
            stored = read_positions(conn, self.tables)
        return {key: position for key, position in stored.items() if key[0] in names}

    def status(self) -> list[ProjectionStatus]:
        """How many of the ledger's events each projection applied, and how many there are
        (its partitions added up; 0 where nothing was ever projected, its tables not even
        made yet: status creates nothing)."""
        heads = self.ledger.recorder.heads()  # type: ignore[attr-defined]
        try:
            positions = self.positions(self.status_pool)
        except psycopg.errors.UndefinedTable:
            positions = {}
        head = sum(heads.values())
        return [
            ProjectionStatus(p.name, sum(positions.get((p.name, part), 0) for part in heads), head)
            for p in self.projections
        ]

    def holders(self) -> list[Holder]:
        """The live members of this worker's group (every process running a worker of this
        name over the schema) and the partitions each holds."""
        with self.status_pool.connection() as conn:
            return holders(conn, self.schema, self.group, self.partition_count())

    @property
    def group(self) -> str:
        """What the workers sharing the partitions with this one have in common: the name and
        the projections run (workers of one name running other projections, as during a
        rolling upgrade that adds one, never take each other's partitions)."""
        return f"{self.name}/{'+'.join(sorted(p.name for p in self.projections))}"

    def partition_count(self) -> int:
        """How many partitions the ledger has."""
        recorder = self.ledger.recorder
        return recorder.partitions or len(recorder.heads())  # type: ignore[attr-defined]

    def quarantined(self) -> dict[str, int]:
        """How many events each of its projections has quarantined (0: none)."""
        with self.pool.connection() as conn:
            counts = quarantine_counts(conn, self.tables)
        return {p.name: counts.get(p.name, 0) for p in self.projections}

    @property
    def lock_timeout(self) -> float:
        """Seconds a projection's transaction waits for a lock before it is held back."""
        return self._catching.lock_timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        self._catching.lock_timeout = seconds

    # -- following the ledger ----------------------------------------------------------------

    def run(self) -> None:
        """Follow the ledger until stop(); restarts itself after errors, with back-off.

        The wait before a restart doubles from 0.1 s up to `max_restart_wait` while restarts
        keep failing, and starts again from 0.1 s once the worker has caught up: an outage
        delays the projections by at most `max_restart_wait` after the database is back.
        """
        backoff = 0.1
        while not self._stop.is_set():
            self._caught_up = False
            try:
                self._follow()
                return
            except Exception:
                if self._caught_up:
                    backoff = 0.1
                _log.exception("projection worker failed; restarting in %.1fs", backoff)
                self._stop.wait(backoff)
                backoff = min(self.max_restart_wait, backoff * 2)

    def _follow(self) -> None:
        conninfo = self.pool.conninfo
        # The listener holds the leases; its application name says which process holds them
        # (`holders`, `memledger projections status`).
        application = f"memledger {self.name} pid {os.getpid()}"[:63]
        kwargs = {**self.pool.kwargs, "autocommit": True, "application_name": application}
        with psycopg.connect(conninfo, **kwargs) as listener:
            channel = self.ledger.recorder.channel_name  # type: ignore[attr-defined]
            listener.execute(SQL("LISTEN {}").format(Identifier(channel)))
            leases = Leases(
                listener, self.schema, self.group, self.partition_count(), interval=LEASE_INTERVAL
            )
            try:
                while not self._stop.is_set():
                    self._turn(leases)
                    self._caught_up = True  # a later failure restarts without the back-off
                    if self._catching.cut:
                        continue  # not caught up: renew the leases, then on at once
                    # Sleep until the ledger notifies a commit (or idle_wait passes: the
                    # leases are renewed at least that often).
                    for _ in listener.notifies(timeout=self.idle_wait, stop_after=1):
                        pass
            finally:
                self.owned = frozenset()

    def _turn(self, leases: Leases) -> None:
        """One turn of the live loop: renew the leases, apply what the partitions held lack
        (for idle_wait at most, so a dead member's partitions wait no longer for the leases'
        renewal), and what is done once per group by the holder of partition 0: the
        projections' backfill and the sweep of due candidates."""
        self.owned = owned = leases.refresh()
        self._catching.cut = False
        if not owned:
            return  # a standby: more members than partitions
        until = time.monotonic() + min(self.idle_wait, 1.0)
        self.catch_up(interruptible=True, partitions=owned, until=until)
        if self._catching.cut or 0 not in owned:
            return
        self.backfill(interruptible=True, partitions=owned, until=until)
        if any(p.name == "candidates" for p in self.projections):
            self.expire_due_candidates()

    def expire_due_candidates(self, limit: int = 100) -> int:
        """Expire pending candidates past their expiry (30 days); returns how many.

        Run by the member holding partition 0 of the group running the candidates projection,
        so one process sweeps at a time.
        """
        with self.pool.connection() as conn:
            try:
                rows = conn.execute(
                    SQL(
                        "SELECT candidate_id FROM {} WHERE status = 'pending' AND expires_at <= %s"
                        " ORDER BY expires_at LIMIT %s"
                    ).format(self.tables["candidates"]),
                    (self.ledger.clock(), limit),
                ).fetchall()
            except psycopg.Error as error:
                if set_aside(error, conn) != "held":
                    raise
                _log.warning("candidates table locked: expiring due candidates later")
                return 0  # the others go on; swept again after the next batch
        return sum(self.ledger.expire_candidate(row[0]).status == "expired" for row in rows)

    def start(self) -> None:
        """Run the worker in a background thread (in-process with the API)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the batch in progress (its transaction commits or rolls back whole)."""
        self._stop.set()
        if self._thread is not None:
            self._wake()
            self._thread.join(timeout)
            self._thread = None

    def _wake(self) -> None:
        # The listener sleeps in LISTEN; a NOTIFY on its channel wakes it to see the stop.
        channel = self.ledger.recorder.channel_name  # type: ignore[attr-defined]
        try:
            with self.pool.connection() as conn:
                conn.execute(SQL("NOTIFY {}").format(Identifier(channel)))
        except Exception:
            _log.debug("could not wake the projection worker", exc_info=True)

    # -- read-your-writes --------------------------------------------------------------------

    def wait(
        self, position: int | None, timeout: float = 5.0, names: Sequence[str] | None = None
    ) -> bool:
        """Block until the projections named (default: all of this worker's) reached
        `position` (a command's, in its partition: domain/ledger/positions.py); False on
        timeout. Names it does not run are ignored (projections/progress.py)."""
        wanted = [p.name for p in self.projections if names is None or p.name in names]
        return self._progress.wait(wanted, position or 0, timeout)

    def wait_all(self, timeout: float = 5.0, names: Sequence[str] | None = None) -> bool:
        """Block until the projections named reached the head of every ledger partition as
        it is now (everything committed before the call); False after `timeout` in all."""
        deadline = time.monotonic() + timeout
        heads: dict[int, int] = self.ledger.recorder.heads()  # type: ignore[attr-defined]
        return all(
            not head or self.wait(pack(p, head), max(0.0, deadline - time.monotonic()), names)
            for p, head in heads.items()
        )
