"""Rebuild projections from the ledger into fresh tables, check them, and swap them in live.

The service keeps serving meanwhile: the fresh tables are filled from position 0 outside any
lock; then, per projection, one transaction locks its tracking row (the live worker waits),
brings both table sets to the same position, compares them row for row, drops the live
tables and renames the fresh ones (and their indexes) into place.

Filling is pipelined: a reader thread reads and decodes the next batches, two lanes (the
calling thread and one more, each with its own connection) apply them to their share of the
projections, and secondary indexes are built once the tables are full (see `_fill`).
"""

from __future__ import annotations

import contextlib
import gc
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg import Connection
from psycopg.sql import SQL, Composed, Identifier
from psycopg_pool import ConnectionPool

from domain.ledger.ledger import MemoryLedger
from projections.base import Projection
from projections.envelope import Envelope, decode_batch
from projections.tables import Tables
from projections.tracking import locked_position, set_position

__all__ = ["RebuildReport", "rebuild"]

_AHEAD = 2  # decoded batches waiting at most (memory stays a few batches)
_GC_THRESHOLD = 100_000  # allocations between young collections during a replay


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
    """Apply events (after, upto] to the tables named by `t`; returns how many.

    The next batches are read and decoded in a background thread while this one's SQL runs
    (the server works on the other core meanwhile); batches are applied in ledger order, each
    once, each in its own transaction (a savepoint when `conn` is in one already).
    """
    done = 0
    with _rare_collections(), _ReadAhead(ledger, after, upto, batch_size) as batches:
        for batch in batches:
            _apply(conn, projections, t, batch)
            done += len(batch)
            if progress is not None:
                progress(len(batch))
    return done


def _apply(
    conn: Connection[Any],
    projections: Sequence[Projection],
    t: Tables,
    batch: list[Envelope],
    *,
    durable: bool = True,
) -> None:
    if not projections:
        return
    with conn.transaction(), conn.cursor() as cur:
        if not durable:
            cur.execute(_ASYNC_COMMIT)
        for projection in projections:
            projection.apply(cur, t, batch)


def _fill(
    ledger: MemoryLedger,
    conn: Connection[Any],
    connect: Callable[[], Connection[Any]],
    projections: Sequence[Projection],
    t: Tables,
    upto: int,
    batch_size: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Fill fresh tables with the events (0, upto], the projections split into two lanes.

    Each lane applies every batch, in order, to its projections, in its own transactions on
    its own connection (`conn`, and one from `connect` for the second lane): while one lane
    waits for the server, the other computes its rows. Secondary indexes are built at the end,
    each lane its own (one sort per index instead of an insertion per row; the replay never
    uses them). The fresh tables are nobody's but this rebuild's until the swap, so their
    commits need not wait for the disk (synchronous_commit off): a crash loses the rebuild,
    never live data.
    """
    indexes = _deferred_indexes(conn, projections, t)
    lanes = _lanes(projections)
    done = 0
    with (
        _rare_collections(),
        _Lane(connect, lanes[1], t, indexes) as lane,
        _ReadAhead(ledger, 0, upto, batch_size) as batches,
    ):
        for batch in batches:
            lane.put(batch)
            _apply(conn, lanes[0], t, batch, durable=False)
            done += len(batch)
            if progress is not None:
                progress(len(batch))
        lane.finish()  # the lane builds its indexes while this one builds its own
        _build(conn, lanes[0], indexes)
    return done


def _deferred_indexes(
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
    return deferred


def _build(
    conn: Connection[Any], projections: Sequence[Projection], indexes: dict[str, list[Composed]]
) -> None:
    with conn.transaction():
        for projection in projections:
            for statement in indexes.get(projection.name, ()):
                conn.execute(statement)


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
    "embeddings": 1000.0,  # the model (tens of memories/s) dwarfs the rest: a lane of its own
}


def _lanes(projections: Sequence[Projection]) -> tuple[list[Projection], list[Projection]]:
    """Two groups of about equal weight (the heaviest projections first, greedily)."""
    lanes: tuple[list[Projection], list[Projection]] = ([], [])
    weights = [0.0, 0.0]
    for projection in sorted(projections, key=lambda p: -_WEIGHTS.get(p.name, 0.5)):
        lightest = 0 if weights[0] <= weights[1] else 1
        lanes[lightest].append(projection)
        weights[lightest] += _WEIGHTS.get(projection.name, 0.5)
    return lanes


class _Lane:
    """A thread applying batches to some projections on a connection of its own."""

    def __init__(
        self,
        connect: Callable[[], Connection[Any]],
        projections: list[Projection],
        t: Tables,
        indexes: dict[str, list[Composed]],
    ) -> None:
        self._connect = connect
        self._projections, self._t, self._indexes = projections, t, indexes
        self._queue: queue.Queue[list[Envelope] | None] = queue.Queue(_AHEAD)
        self._error: BaseException | None = None
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="rebuild-lane", daemon=True)

    def __enter__(self) -> _Lane:
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
        """No more batches: the lane builds its indexes and ends."""
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
                _apply(conn, self._projections, t, batch, durable=False)
            if self._error is None:
                _build(conn, self._projections, self._indexes)
        except BaseException as error:
            self._error = error


class _Stopped(Exception):
    """The rebuild stopped (it raised): a lane must not build its indexes."""


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
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


class _ReadAhead:
    """Decoded batches of the ledger's events (after, upto], read by a background thread."""

    def __init__(self, ledger: MemoryLedger, after: int, upto: int, batch_size: int) -> None:
        self._ledger = ledger
        self._after, self._upto, self._size = after, upto, batch_size
        self._queue: queue.Queue[list[Envelope] | BaseException | None] = queue.Queue(_AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="rebuild-reader", daemon=True)

    def __enter__(self) -> Iterator[list[Envelope]]:
        self._thread.start()
        return self._batches()

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        while self._thread.is_alive():  # unblock a reader waiting for room in the queue
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _batches(self) -> Iterator[list[Envelope]]:
        while (item := self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    def _read(self) -> None:
        ledger, start = self._ledger, self._after + 1
        try:
            while start <= self._upto and not self._stop.is_set():
                notes = _notifications(ledger, start, self._size, self._upto)
                if not notes:
                    break
                batch = decode_batch(ledger.mapper, notes)
                start = batch[-1].position + 1
                self._put(batch)
        except BaseException as error:
            self._put(error)
            return
        self._put(None)

    def _put(self, item: list[Envelope] | BaseException | None) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.05)
                return


class _Note(NamedTuple):
    """A notification as the mapper reads it (a tuple: a tenth of a Notification's cost)."""

    id: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


@retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
def _notifications(ledger: MemoryLedger, start: int, limit: int, stop: int) -> list[Any]:
    """`recorder.select_notifications(start, limit, stop=stop)`, read in binary.

    The same rows as the recorder's own query, fetched as binary tuples rather than text
    dictionaries, and handed on as `_Note`s, which have every attribute decoding reads.
    """
    recorder = ledger.recorder
    if not isinstance(recorder, PostgresApplicationRecorder):
        return list(recorder.select_notifications(start, limit, stop=stop))
    statement = SQL(
        "SELECT notification_id, originator_id, originator_version, topic, state FROM {}.{}"
        " WHERE notification_id >= %s AND notification_id <= %s"
        " ORDER BY notification_id LIMIT %s"
    ).format(Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
    with (
        recorder.datastore.get_connection() as conn,
        conn.cursor(row_factory=_note_row, binary=True) as cur,
    ):
        cur.execute(statement, (start, stop, limit), prepare=True)
        return cur.fetchall()


def _note_row(cursor: Any) -> Callable[[Sequence[Any]], _Note]:
    return _Note._make


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
            head = ledger.position()
            report.events = _fill(
                ledger,
                conn,
                lambda: Connection.connect(pool.conninfo, **{**pool.kwargs, "autocommit": True}),
                projections,
                fresh,
                head,
                batch_size,
                progress,
            )
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
