"""Applying a decoded batch to projections, each in a short transaction of its own.

A projection's rows and its position commit together (exactly once per projection), in a
transaction that waits at most its lock timeout for a lock. So a view that cannot make
progress holds back only itself: one whose table is locked (a LOCK TABLE, a DDL, a rebuild's
swap holding its tracking row) or that times out is `held` (retried soon), one that cannot run
at all is `failed` (retried later); the others commit and go on. An event a projection cannot
apply is quarantined (projections/quarantine.py) and its position moves past it.

One flush per batch, as when the batch was one transaction: every transaction but the batch's
last commits with `synchronous_commit` off, and the last one's flush of the write-ahead log
makes the earlier ones durable too (the WAL writer flushes them soon anyway, when the last
fails). A crash in between may lose those commits, their positions with them: the events are
applied again from the ledger, which is durable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
from psycopg import Connection
from psycopg.sql import SQL

from projections.base import Projection
from projections.envelope import Envelope
from projections.failures import failure
from projections.quarantine import apply_each
from projections.tracking import Tables, locked_position, set_position

__all__ = ["BATCH", "Applied", "SetAside", "Verdict", "apply_batch", "set_aside"]

_log = logging.getLogger(__name__)
Verdict = Literal["held", "failed"]

BATCH = 5000
"""Ledger events read and applied together, at most: by the live worker (a batch is what
arrived since the last one) and by a rebuild. A catch-up's events of one memory (created,
changed, suppressed) fold into one row write when they share a batch, and each batch costs
every projection a transaction: 5,000 caught up 100k events a third to a half faster than
1,000, by one process or two (docs/benchmarks.md), and such a batch is applied in well under a
second."""

_LOCK_TIMEOUT = "set_config('lock_timeout', %s, true)"  # as tracking.set_lock_timeout
_ASYNC_COMMIT = "set_config('synchronous_commit', 'off', true)"
_SETTINGS = {  # (a lock timeout given, the commit durable): one round trip at most
    (True, True): SQL("SELECT " + _LOCK_TIMEOUT),
    (True, False): SQL("SELECT " + _LOCK_TIMEOUT + ", " + _ASYNC_COMMIT),
    (False, False): SQL("SELECT " + _ASYNC_COMMIT),
}


@dataclass
class Applied:
    """What a batch did to each projection."""

    done: list[Projection] = field(default_factory=list)
    """Committed the batch (rows and position)."""
    held: list[tuple[Projection, Exception]] = field(default_factory=list)
    """Could not make progress now (a lock or a timeout): nothing committed, retry soon."""
    failed: list[tuple[Projection, Exception]] = field(default_factory=list)
    """Cannot run at all (a missing table, a bug): nothing committed, retry later."""


def set_aside(error: Exception, conn: Connection[Any]) -> Verdict | None:
    """How a projection's failure on `conn` is met: `held` (the server refused a statement
    for a lock or statement timeout, a serialization failure, a deadlock: the database is
    well, this projection must wait), `failed` (it cannot run), or None: the database, the
    connection or the ledger is unwell, the caller backs off whole."""
    kind = failure(error, conn)
    if kind != "transient":
        return "failed"
    if isinstance(error, psycopg.Error) and error.sqlstate and not (conn.closed or conn.broken):
        return "held"
    return None


def apply_batch(
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    batch: Sequence[Envelope],
    *,
    lock_timeouts: Mapping[str, float] | None = None,
    committed: Callable[[Projection], None] | None = None,
) -> Applied:
    """Apply the events each projection has not seen, and its new position, exactly once
    (`batch`: events of one partition, in order, at least one):
    each projection in a transaction of its own, in the order given, its tracking row locked
    first (a concurrent runner waits, then skips what this one applied).

    `lock_timeouts`: seconds each projection's transaction may wait for a lock (missing:
    the session's setting). `committed` is called after each projection's commit (readers
    waiting for it need not wait for the rest of the batch). Raises what means the database
    (or the ledger) is unwell; the projections committed before stay committed.
    """
    applied = Applied()
    timeouts = lock_timeouts or {}
    for i, projection in enumerate(projections):
        settings = _settings(timeouts.get(projection.name), i == len(projections) - 1)
        try:
            try:
                _advance(conn, projection, t, batch, settings, one_by_one=False)
            except Exception as error:  # an event's failure: again, one event at a time
                if failure(error, conn) != "event":
                    raise
                _advance(conn, projection, t, batch, settings, one_by_one=True)
        except Exception as error:
            verdict = set_aside(error, conn)
            if verdict is None:
                raise
            getattr(applied, verdict).append((projection, error))
        else:
            applied.done.append(projection)
            if committed is not None:
                committed(projection)
    return applied


def _settings(timeout: float | None, durable: bool) -> tuple[SQL, list[str]] | None:
    """The statement setting the transaction's lock timeout and commit (None: the session's)."""
    statement = _SETTINGS.get((timeout is not None, durable))
    if statement is None:
        return None
    return statement, [f"{max(1, int(timeout * 1000))}ms"] if timeout is not None else []


def _advance(
    conn: Connection[Any],
    projection: Projection,
    t: Tables,
    batch: Sequence[Envelope],
    settings: tuple[SQL, list[str]] | None,
    *,
    one_by_one: bool,
) -> None:
    """In a transaction (no savepoint: a failed one is rolled back whole): lock the
    projection's position, apply the events after it (together, or `one_by_one`,
    quarantining those it cannot apply), and move it to the last."""
    with conn.transaction(), conn.cursor() as cur:
        if settings is not None:
            cur.execute(*settings)
        partition = batch[0].partition
        position = locked_position(cur, t, projection.name, partition)
        pending = [e for e in batch if e.local > position]
        if pending:
            if one_by_one:
                apply_each(conn, cur, projection, t, pending)
            else:
                projection.apply(cur, t, pending)
            set_position(cur, t, projection.name, partition, pending[-1].local)


class SetAside:
    """When each projection set aside may run again: a wait per projection, doubled while it
    keeps failing, from 0.1 s up to `held_cap` when held (a lock, a timeout), from 1 s up to
    `failed_cap` when failed; `done` forgets it."""

    def __init__(self, *, held_cap: float, failed_cap: float) -> None:
        self.held_cap, self.failed_cap = held_cap, failed_cap
        self.held: set[str] = set()
        """Projections held back now (a lock or a timeout)."""
        self._retry_at: dict[str, float] = {}
        self._delay: dict[str, float] = {}

    def may_run(self, name: str) -> bool:
        """False while the projection waits to be retried."""
        return time.monotonic() >= self._retry_at.get(name, 0.0)

    def set_aside(self, verdict: Verdict, name: str, error: Exception) -> None:
        """`hold_back` or `failed`, as `verdict` says."""
        (self.hold_back if verdict == "held" else self.failed)(name, error)

    def hold_back(self, name: str, error: Exception) -> None:
        """Its tables locked (or a timeout): retried soon; the others go on meanwhile."""
        delay = self._wait(name, 0.1, self.held_cap)
        self.held.add(name)
        code = error.sqlstate if isinstance(error, psycopg.Error) else None
        _log.warning(
            "projection %s held back (%s %s: a lock or a timeout), the others go on;"
            " retrying in %.1fs",
            name,
            type(error).__name__,
            code or "-",
            delay,
        )

    def failed(self, name: str, error: Exception) -> None:
        """It cannot run: retried later, alone, so that it holds back no other."""
        delay = self._wait(name, 1.0, self.failed_cap)
        self.held.discard(name)
        _log.error(
            "projection %s failed; retrying in %.1fs",
            name,
            delay,
            exc_info=(type(error), error, error.__traceback__),
        )

    def done(self, name: str) -> None:
        """It committed: no more waiting."""
        self._delay.pop(name, None)
        self._retry_at.pop(name, None)
        self.held.discard(name)

    def _wait(self, name: str, first: float, cap: float) -> float:
        delay = min(cap, 2 * self._delay[name] if name in self._delay else first)
        self._delay[name] = delay
        self._retry_at[name] = time.monotonic() + delay
        return delay
