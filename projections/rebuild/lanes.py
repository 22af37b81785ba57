"""Applying batches to fresh tables in two lanes, and building their indexes afterwards.

A lane is a thread with a connection of its own applying every batch, in order, to its share
of the projections: while one lane waits for the server, the other computes its rows.
Secondary indexes are created once the tables are full (one sort per index instead of an
insertion per row; the replay never uses them).
"""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.sql import SQL, Composed

from domain.ledger.sealing import SealingMapper
from projections.base import Projection
from projections.envelope import Envelope
from projections.failures import failure
from projections.quarantine import apply_isolated
from projections.rebuild.distributed import distribute_like_live
from projections.rebuild.reading import AHEAD, Read, ReadAhead, spans
from projections.tracking import Tables

__all__ = [
    "Fill",
    "Lane",
    "apply",
    "build",
    "build_indexes",
    "deferred_indexes",
    "fill_lanes",
    "lanes",
    "rare_collections",
]

_GC_THRESHOLD = 100_000  # allocations between young collections during a replay
_ASYNC_COMMIT = SQL("SET LOCAL synchronous_commit TO OFF")
_WEIGHTS = {  # Python CPU seconds per 100k events of the bench ledger (applying, with its SQL sent)
    "search_terms": 2.3,
    "profile": 1.5,
    "audit_log": 0.55,
    "active_memories": 0.45,
    "candidates": 0.3,
    "memory_versions": 0.25,
    "user_revisions": 0.15,
    "tombstones": 0.07,
    "embeddings": 0.3,  # rows only; with a model, far more (see `lanes`)
}


def apply(
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    batch: list[Envelope],
    *,
    durable: bool = True,
) -> None:
    """Apply a batch to the projections in one transaction (a savepoint when in one already).

    An event a projection cannot apply is quarantined in `t`'s quarantine table, as the live
    worker does (projections/quarantine.py): the batch is then applied again, each projection
    in a savepoint of its own. Not `durable`: for fresh tables nobody reads until the swap,
    the commit need not wait for the disk (a crash loses the rebuild, never live data).
    """
    if not projections:
        return
    try:
        _apply(conn, projections, t, batch, durable, isolated=False)
    except Exception as error:
        if failure(error, conn) != "event":
            raise
        _apply(conn, projections, t, batch, durable, isolated=True)


def _apply(
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    batch: list[Envelope],
    durable: bool,
    *,
    isolated: bool,
) -> None:
    with conn.transaction(), conn.cursor() as cur:
        if not durable:
            cur.execute(_ASYNC_COMMIT)
        for projection in projections:
            if isolated:
                apply_isolated(conn, cur, projection, t, batch)
            else:
                projection.apply(cur, t, batch)


@dataclass(frozen=True)
class Fill:
    """What a rebuild fills: the fresh tables `t` of `projections`, with the events of each
    partition in `upto` from its start up to its position there (`{partition: position}`),
    read and applied `batch_size` at a time."""

    projections: Sequence[Projection]
    t: Tables
    upto: Mapping[int, int]
    batch_size: int

    def share(self, partitions: Sequence[int]) -> Fill:
        """The same fill over some of its partitions only."""
        upto = {p: self.upto[p] for p in partitions}
        return Fill(self.projections, self.t, upto, self.batch_size)

    @property
    def events(self) -> int:
        """How many events it applies (the partitions' positions added up)."""
        return sum(self.upto.values())


def fill_lanes(
    read: Read,
    mapper: SealingMapper,
    conn: Connection[Any],
    connect: Callable[[], Connection[Any]],
    fill: Fill,
    progress: Callable[[int], None] | None,
    indexes: dict[str, list[Composed]] | None = None,
    two_lanes: bool = True,
) -> int:
    """Apply the events `read` returns of `fill`'s partitions, one partition after another,
    to fresh tables; returns how many.

    A reader thread decodes the next batches (`ReadAhead`); with `two_lanes`
    the projections are split into two lanes: this thread on `conn`, and one more on a
    connection from `connect`. With `indexes`, each lane then builds its projections'
    kept-back indexes.
    """
    projections, t = fill.projections, fill.t
    first, second = lanes(projections) if two_lanes else (list(projections), [])
    done = 0
    with (
        rare_collections(),
        Lane(connect, second, t, indexes) as lane,
        ReadAhead(read, mapper, spans(fill.upto), fill.batch_size) as batches,
    ):
        for batch in batches:
            lane.put(batch)
            apply(conn, first, t, batch, durable=False)
            done += len(batch)
            if progress is not None:
                progress(len(batch))
        lane.finish()  # the lane builds its indexes while this one builds its own
        if indexes is not None:
            build(conn, first, indexes)
    return done


def build_indexes(
    conn: Connection[Any],
    connect: Callable[[], Connection[Any]],
    indexes: dict[str, list[Composed]],
) -> None:
    """Create the kept-back indexes: each GIN index on a connection of its own, meanwhile
    the others one after another on `conn` (the server builds them on several cores).

    A GIN index sorts every term of every row: search_terms' takes longer than all the
    B-trees together, so it starts first and alone.
    """
    statements = [statement for group in indexes.values() for statement in group]
    gin = [s for s in statements if " USING gin " in s.as_string(conn)]
    with ThreadPoolExecutor(max(1, len(gin)), thread_name_prefix="rebuild-index") as threads:
        started = [threads.submit(_execute, connect, statement) for statement in gin]
        with conn.transaction():
            for statement in statements:
                if statement not in gin:
                    conn.execute(statement)
        for future in started:
            future.result()


def _execute(connect: Callable[[], Connection[Any]], statement: Composed) -> None:
    with connect() as conn:
        conn.execute(statement)


def deferred_indexes(
    conn: Connection[Any], projections: Sequence[Projection], t: Tables
) -> dict[str, list[Composed]]:
    """Create the projections' tables, keeping back their secondary indexes (by projection)."""
    deferred: dict[str, list[Composed]] = {}
    with conn.transaction():
        for projection in projections:
            for statement in projection.create(t):
                if statement.as_string(conn).startswith("CREATE INDEX"):
                    deferred.setdefault(projection.name, []).append(statement)
                else:
                    conn.execute(statement)
        # On Citus: distributed like the live tables, else the swap would make them local.
        logical = [name for projection in projections for name in projection.tables]
        distribute_like_live(conn, Tables(t.schema), t, logical)
    return deferred


def build(
    conn: Connection[Any], projections: Sequence[Projection], indexes: dict[str, list[Composed]]
) -> None:
    """Create the secondary indexes kept back for these projections."""
    with conn.transaction():
        for projection in projections:
            for statement in indexes.get(projection.name, ()):
                conn.execute(statement)


def lanes(projections: Sequence[Projection]) -> tuple[list[Projection], list[Projection]]:
    """Two groups of about equal weight (the heaviest projections first, greedily).

    A projection that calls a model (embeddings with an embedder) gets a lane of its own:
    tens of memories/s dwarf the rest.
    """
    groups: tuple[list[Projection], list[Projection]] = ([], [])
    weights = [0.0, 0.0]

    def weight(p: Projection) -> float:
        return 1000.0 if not p.partitionable else _WEIGHTS.get(p.name, 0.5)

    for projection in sorted(projections, key=lambda p: -weight(p)):
        lightest = 0 if weights[0] <= weights[1] else 1
        groups[lightest].append(projection)
        weights[lightest] += weight(projection)
    return groups


class Lane:
    """A thread applying batches to some projections on a connection of its own.

    With `indexes`, it builds its projections' secondary indexes once given every batch.
    """

    def __init__(
        self,
        connect: Callable[[], Connection[Any]],
        projections: list[Projection],
        t: Tables,
        indexes: dict[str, list[Composed]] | None,
    ) -> None:
        self._connect = connect
        self._projections, self._t, self._indexes = projections, t, indexes
        self._queue: queue.Queue[list[Envelope] | None] = queue.Queue(AHEAD)
        self._error: BaseException | None = None
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="rebuild-lane", daemon=True)

    def __enter__(self) -> Lane:
        if self._projections:  # else: nothing to do, no connection, no thread
            self._conn = self._connect()
            self._thread.start()
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        if not self._projections:
            return
        try:
            if error is None:
                self.finish()
                self._thread.join()
            else:  # stop the lane after its current batch
                self._error = self._error or _Stopped()
                with contextlib.suppress(queue.Empty):
                    while True:
                        self._queue.get_nowait()
                self._queue.put(None)
                self._thread.join()
        finally:
            self._conn.close()
        if error is None and self._error is not None:
            raise self._error

    def put(self, batch: list[Envelope]) -> None:
        """Hand a batch to the lane (raises what stopped the lane, if it did)."""
        if self._projections:
            self._put(batch)

    def finish(self) -> None:
        """No more batches: the lane builds its indexes (if given) and ends."""
        if self._projections and not self._finished:
            self._finished = True
            self._put(None)

    def _put(self, item: list[Envelope] | None) -> None:
        while True:
            if self._error is not None:
                raise self._error
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.05)
                return

    def _run(self) -> None:
        conn, t = self._conn, self._t
        try:
            while (batch := self._queue.get()) is not None:
                apply(conn, self._projections, t, batch, durable=False)
            if self._error is None and self._indexes is not None:
                build(conn, self._projections, self._indexes)
        except BaseException as error:
            self._error = error


class _Stopped(Exception):
    """The rebuild stopped (it raised): a lane must not build its indexes."""


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """Let the cyclic garbage collector run rarely while a replay runs.

    A replay allocates millions of short-lived objects, all freed by reference counting (it
    makes no cycles). At the default threshold the collector would run thousands of times,
    each time re-scanning every object still alive (the key cache, the batches in flight) for
    nothing: a fifth of a rebuild's CPU. It still runs, every `_GC_THRESHOLD` allocations.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], _GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
