"""Reading the ledger for a rebuild: partitions in binary rows, decoded a few batches ahead.

A rebuild reads spans of partitions (`Span`: a partition's events after one of its positions
up to another), each partition in its own order; no order holds across partitions, and none
is needed (a user's events are all in one partition). `ReadAhead` runs a reader thread that
fetches and decodes the next batches, each of one partition, while the caller applies the
current one. What it reads with is a `Read` function: on the ledger's own connections
(`ledger_reader`) or on one connection of a rebuild process (`connection_reader`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple
from uuid import UUID

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier, Literal

from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import MAX_PARTITIONS, local_of
from domain.ledger.sealing import SealingMapper
from projections.envelope import Envelope, decode_batch

__all__ = [
    "AHEAD",
    "Note",
    "Read",
    "ReadAhead",
    "Span",
    "connection_reader",
    "events_table",
    "heads",
    "ledger_reader",
    "spans",
]

AHEAD = 2  # decoded batches waiting at most (memory stays a few batches)

Read = Callable[[int, int, int, int], Sequence[Any]]
"""(partition, after, upto, limit) -> at most `limit` notifications of the partition after its
position `after` up to `upto`, in order, each `id` the packed ledger position."""


class Span(NamedTuple):
    """The events of `partition` after its position `after`, up to `upto` (within it)."""

    partition: int
    after: int
    upto: int


def spans(upto: Mapping[int, int], after: Mapping[int, int] | None = None) -> list[Span]:
    """The spans from `after` (missing: the start) to `upto` of each partition, the empty
    ones left out, in partition order."""
    start = after or {}
    return [
        Span(partition, start.get(partition, 0), head)
        for partition, head in sorted(upto.items())
        if head > start.get(partition, 0)
    ]


class Note(NamedTuple):
    """A notification as the mapper reads it (a tuple: a tenth of a Notification's cost)."""

    id: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


def heads(ledger: MemoryLedger) -> dict[int, int]:
    """Every partition's last position (its own sequence), read now."""
    return dict(ledger.recorder.heads())  # type: ignore[attr-defined]


def events_table(ledger: MemoryLedger) -> Composed | None:
    """The ledger's events table, or None when the ledger is not stored in PostgreSQL."""
    recorder = ledger.recorder
    if not isinstance(recorder, PostgresApplicationRecorder):
        return None
    return SQL("{}.{}").format(
        Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)
    )


def _statement(table: Composed) -> Composed:
    # The position packed in SQL (domain/ledger/positions.py `pack`): rows become Notes as
    # they are, with no Python step per row.
    return SQL(
        "SELECT position * {} + partition, originator_id, originator_version, topic, state"
        " FROM {} WHERE partition = %s AND position > %s AND position <= %s"
        " ORDER BY position LIMIT %s"
    ).format(Literal(MAX_PARTITIONS), table)


def ledger_reader(ledger: MemoryLedger) -> Read:
    """What `recorder.read_partition` reads, in binary rows, on the ledger's connections."""
    recorder, table = ledger.recorder, events_table(ledger)
    if table is None or not isinstance(recorder, PostgresApplicationRecorder):

        def select(partition: int, after: int, upto: int, limit: int) -> Sequence[Any]:
            return recorder.read_partition(partition, after, limit, until=upto)  # type: ignore[attr-defined,no-any-return]

        return select
    statement = _statement(table)
    datastore = recorder.datastore

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def read(partition: int, after: int, upto: int, limit: int) -> list[Note]:
        with (
            datastore.get_connection() as conn,
            conn.cursor(row_factory=_note_row, binary=True) as cur,
        ):
            cur.execute(statement, (partition, after, upto, limit), prepare=True)
            return cur.fetchall()

    return read


def connection_reader(conn: psycopg.Connection[Any], table: Composed) -> Read:
    """The same read on `conn` alone (a rebuild process's own connection)."""
    statement = _statement(table)

    def read(partition: int, after: int, upto: int, limit: int) -> list[Note]:
        with conn.cursor(row_factory=_note_row, binary=True) as cur:
            cur.execute(statement, (partition, after, upto, limit), prepare=True)
            return cur.fetchall()

    return read


def _note_row(cursor: Any) -> Callable[[Sequence[Any]], Note]:
    return Note._make


class ReadAhead:
    """Decoded batches of the events of `spans` that `read` returns, from a background thread:
    the spans one after another, each in its partition's order, a batch never spanning two.

    The keys of the users a batch names are loaded with it, in one query (the views hash terms
    and keys under them), rather than one query per user when a view first meets each.
    """

    def __init__(
        self,
        read: Read,
        mapper: SealingMapper,
        spans: Sequence[Span],
        batch_size: int,
    ) -> None:
        self._read, self._mapper = read, mapper
        self._spans, self._size = list(spans), batch_size
        self._queue: queue.Queue[list[Envelope] | BaseException | None] = queue.Queue(AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rebuild-reader", daemon=True)

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

    def _run(self) -> None:
        try:
            for span in self._spans:
                after = span.after
                while after < span.upto and not self._stop.is_set():
                    notes = self._read(span.partition, after, span.upto, self._size)
                    if not notes:
                        break  # nothing more up to `upto` (never so below a head read before)
                    after = local_of(notes[-1].id)
                    self._put(self._decoded(notes))
        except BaseException as error:
            self._put(error)
            return
        self._put(None)

    def _decoded(self, notes: Sequence[Any]) -> list[Envelope]:
        batch = decode_batch(self._mapper, notes, fresh=False)
        users = {getattr(envelope.event, "user_id", None) for envelope in batch}
        users.discard(None)
        self._mapper.keys.prefetch(map(user_key_id, users))
        return batch

    def _put(self, item: list[Envelope] | BaseException | None) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.05)
                return
