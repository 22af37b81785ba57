"""Reading the ledger for a rebuild: binary notification rows, decoded a few batches ahead.

`ReadAhead` runs a reader thread that fetches and decodes the next batches while the caller
applies the current one. What it reads is a `Read` function: all of the ledger's events
(`ledger_reader`), or one process's share of them in a partitioned rebuild
(projections/rebuild/processes.py).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import InterfaceError, OperationalError
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier

from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.ledger.sealing import SealingMapper
from projections.envelope import Envelope, decode_batch

__all__ = ["AHEAD", "Note", "Read", "ReadAhead", "events_table", "ledger_reader"]

AHEAD = 2  # decoded batches waiting at most (memory stays a few batches)

Read = Callable[[int, int, int], tuple[Sequence[Any], int]]
"""(start, limit, stop) -> (at most `limit` notifications from `start` to `stop` in order, the
position to read from next); no notifications and a next position past `stop`: the end."""


class Note(NamedTuple):
    """A notification as the mapper reads it (a tuple: a tenth of a Notification's cost)."""

    id: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes


def events_table(ledger: MemoryLedger) -> Composed | None:
    """The ledger's events table, or None when the ledger is not stored in PostgreSQL."""
    recorder = ledger.recorder
    if not isinstance(recorder, PostgresApplicationRecorder):
        return None
    return SQL("{}.{}").format(
        Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)
    )


def ledger_reader(ledger: MemoryLedger) -> Read:
    """`recorder.select_notifications(start, limit, stop=stop)`, read in binary.

    The same rows as the recorder's own query, fetched as binary tuples rather than text
    dictionaries, and handed on as `Note`s, which have every attribute decoding reads.
    """
    recorder, table = ledger.recorder, events_table(ledger)
    if table is None or not isinstance(recorder, PostgresApplicationRecorder):

        def select(start: int, limit: int, stop: int) -> tuple[Sequence[Any], int]:
            notes = recorder.select_notifications(start, limit, stop=stop)
            return notes, notes[-1].id + 1 if notes else stop + 1

        return select
    statement = SQL(
        "SELECT notification_id, originator_id, originator_version, topic, state FROM {}"
        " WHERE notification_id >= %s AND notification_id <= %s"
        " ORDER BY notification_id LIMIT %s"
    ).format(table)
    datastore = recorder.datastore

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def read(start: int, limit: int, stop: int) -> tuple[list[Note], int]:
        with (
            datastore.get_connection() as conn,
            conn.cursor(row_factory=_note_row, binary=True) as cur,
        ):
            cur.execute(statement, (start, stop, limit), prepare=True)
            notes = cur.fetchall()
        return notes, notes[-1].id + 1 if notes else stop + 1

    return read


def _note_row(cursor: Any) -> Callable[[Sequence[Any]], Note]:
    return Note._make


class ReadAhead:
    """Decoded batches of the events (after, upto] that `read` returns, from a background thread.

    `check` (optional) sees each decoded batch with its notifications before it is handed on,
    in the reader thread; what it raises ends the iteration with that error. The keys of the
    users a batch names are loaded with it, in one query (the views hash terms and keys under
    them), rather than one query per user when a view first meets each.
    """

    def __init__(
        self,
        read: Read,
        mapper: SealingMapper,
        after: int,
        upto: int,
        batch_size: int,
        check: Callable[[Sequence[Any], list[Envelope]], None] | None = None,
    ) -> None:
        self._read, self._mapper, self._check = read, mapper, check
        self._after, self._upto, self._size = after, upto, batch_size
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
        start = self._after + 1
        try:
            while start <= self._upto and not self._stop.is_set():
                notes, start = self._read(start, self._size, self._upto)
                if not notes:
                    continue
                batch = decode_batch(self._mapper, notes, fresh=False)
                users = {getattr(envelope.event, "user_id", None) for envelope in batch}
                users.discard(None)
                self._mapper.keys.prefetch(map(user_key_id, users))
                if self._check is not None:
                    self._check(notes, batch)
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
