"""Filling a rebuild's fresh tables from several processes at once, each over a share of users.

One process cannot go faster than one core (the GIL holds decoding, every projection's rows
and psycopg's encoding alike). Every projection's rows of a user depend on that user's events
alone (a candidate is shredded by its own user's forget; a revision counts its user's
changes), so the users can be split: each forked process reads only the events of its share
(the database hashes the `user_id` of each event's clear part, no key needed), decodes them
with keys it fetches itself, and applies them in ledger order to the same fresh tables,
touching rows no other process touches. The parent relays progress and, once every process
is done, the tables are complete up to the same position as a single process would leave
them; their indexes are built after.

Forking keeps the master keys in memory (no secret crosses a pipe) and starts in
milliseconds; each child opens its own connections and key cache, as a pool's connections
and the locks other threads may hold must not cross a fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import os
import secrets
import signal
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from typing import Any, NamedTuple
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.sql import SQL, Composed, Identifier

from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.sealed_state import clear_json
from projections.base import Projection
from projections.envelope import Envelope
from projections.rebuild.lanes import Fill, fill_lanes
from projections.rebuild.reading import Read, events_table
from projections.sealed import TERM_MEMO, register

__all__ = ["Unpartitionable", "can_partition", "end_sessions", "fill_partitioned"]

_PR_SET_PDEATHSIG = 1  # prctl(2)


class Unpartitionable(Exception):
    """The events cannot be split by user (a clear part the database cannot read as JSON,
    or a user that differs from the decoded event's): fill in one process instead."""


def can_partition(ledger: MemoryLedger, projections: Sequence[Projection]) -> bool:
    """True when these projections can be filled by forked processes from this ledger."""
    return (
        events_table(ledger) is not None
        and "fork" in multiprocessing.get_all_start_methods()
        and all(p.partitionable for p in projections)
    )


def fill_partitioned(
    ledger: MemoryLedger,
    conninfo: str,
    kwargs: dict[str, Any],
    fill: Fill,
    progress: Callable[[int], None] | None,
    processes: int,
) -> int:
    """Do `fill` from `processes` forked processes, each over a share of the users.

    Returns how many events they applied together. Raises `Unpartitionable` when the split
    failed (the tables then hold part of the events: empty them before filling otherwise),
    and RuntimeError with the child's traceback when a process failed; either way, the
    children's server sessions have ended first (`end_sessions`), so none of their
    statements can still run once it raises.
    """
    context = multiprocessing.get_context("fork")
    children: list[tuple[multiprocessing.process.BaseProcess, Pipe]] = []
    sessions = f"memledger-rebuild-{secrets.token_hex(6)}"  # the children's application_name
    child_kwargs = {**kwargs, "application_name": sessions}
    finished = False
    try:
        for part in range(processes):
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(
                target=_child,
                args=(ledger, conninfo, child_kwargs, fill),
                kwargs={"part": part, "parts": processes, "sender": sender, "parent": os.getpid()},
                name=f"memledger-rebuild-{part}",
                daemon=True,
            )
            with warnings.catch_warnings():
                # Python 3.12+ warns about forking a threaded process: the child uses none of
                # the parent's threads, locks or connections (see the module docstring).
                warnings.filterwarnings("ignore", ".*fork", DeprecationWarning)
                # Frozen, the parent's objects are never collected in the child: no inherited
                # connection is finalised there (that would end it for the parent too), and
                # no page is copied just to scan it.
                gc.freeze()
                try:
                    child.start()
                finally:
                    gc.unfreeze()
            sender.close()  # the child holds the writing end: EOF once it exits
            children.append((child, receiver))
        done = _follow(children, progress)
        finished = True
        return done
    finally:
        for child, receiver in children:
            if child.is_alive():
                child.terminate()
            child.join()
            receiver.close()
        if not finished:
            end_sessions(conninfo, kwargs, sessions)


def end_sessions(
    conninfo: str, kwargs: dict[str, Any], application_name: str, timeout: float = 30.0
) -> None:
    """End the server sessions named `application_name` and wait until they are gone.

    A child killed just after sending a statement leaves it to its server session, which may
    run it after the caller moved on (e.g. into the TRUNCATE of a one-process fill): a
    terminated session runs nothing more, and an open autocommit statement is rolled back.
    """
    query = SQL(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = %s AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + timeout
    with psycopg.connect(conninfo, **{**kwargs, "autocommit": True}) as conn:
        while (row := conn.execute(query, (application_name,)).fetchone()) and row[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{row[0]} rebuild sessions did not end in {timeout} s")
            time.sleep(0.02)


def _follow(
    children: list[tuple[multiprocessing.process.BaseProcess, Pipe]],
    progress: Callable[[int], None] | None,
) -> int:
    """Relay the children's progress until each reported its count; raise what one raised."""
    pending = {receiver: child for child, receiver in children}
    total = 0
    while pending:
        for ready in wait(list(pending)):
            assert isinstance(ready, Pipe)
            try:
                kind, value = ready.recv()
            except EOFError:
                child = pending[ready]
                child.join()
                raise RuntimeError(
                    f"rebuild process {child.name} ended (exit code {child.exitcode})"
                    " without reporting"
                ) from None
            if kind == "progress":
                if progress is not None:
                    progress(value)
            elif kind == "done":
                total += value
                del pending[ready]
            elif kind == "unpartitionable":
                raise Unpartitionable(value)
            else:
                raise RuntimeError(f"rebuild process failed:\n{value}")
    return total


class _UserNote(NamedTuple):
    """A notification (see rebuild_reading.Note) with the user its clear part names."""

    id: int
    originator_id: UUID
    originator_version: int
    topic: str
    state: bytes
    user_id: str | None


class _OwnConnection:
    """A datastore for `DataKeyStore.through`: one connection of this process, dict rows."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str) -> None:
        self.conn, self.schema = conn, schema

    @contextlib.contextmanager
    def get_connection(self) -> Any:
        yield self.conn


def _child(
    ledger: MemoryLedger,
    conninfo: str,
    kwargs: dict[str, Any],
    fill: Fill,
    *,
    part: int,
    parts: int,
    sender: Pipe,
    parent: int,
) -> None:
    """Apply this process's share of the events; report progress, then the count or the error."""
    _die_with(parent)
    options = {**kwargs, "autocommit": True}

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(conninfo, **options)

    try:
        with (
            psycopg.connect(conninfo, **options, row_factory=dict_row) as reading,
            connect() as conn,
        ):
            keys = ledger.mapper.keys.through(_OwnConnection(reading, fill.t.schema))
            register(fill.t.schema, keys, memo=TERM_MEMO)
            # One lane: the processes keep the cores busy, and a second lane would only add
            # a thread contending for this one's GIL (measured ~15% slower).
            done = fill_lanes(
                _reader(reading, ledger, part, parts),
                ledger.mapper.with_keys(keys),
                conn,
                connect,
                fill,
                lambda n: sender.send(("progress", n)),
                check=_same_users,
                two_lanes=False,
            )
        sender.send(("done", done))
    except Unpartitionable as error:
        sender.send(("unpartitionable", str(error)))
    except BaseException:
        sender.send(("error", traceback.format_exc()))
    finally:
        sender.close()


def _die_with(parent: int) -> None:
    """Linux: this process is killed with its parent (a rebuild killed with kill -9 leaves no
    process filling its tables, nor their sessions, which hold its tables' locks)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before that: nobody would read our results
        os._exit(1)


def _reader(conn: psycopg.Connection[Any], ledger: MemoryLedger, part: int, parts: int) -> Read:
    """The events of the users whose hash falls in `part`, read on `conn` (this thread's).

    Each read scans a window of `limit` x `parts` positions (about `limit` of them are this
    part's): a LIMIT over the filtered rows would let the planner scan and hash the whole
    rest of the ledger for every batch.
    """
    table = events_table(ledger)
    assert table is not None
    statement = _part_statement(table)

    def read(start: int, limit: int, stop: int) -> tuple[list[_UserNote], int]:
        end = min(stop, start + limit * parts - 1)
        try:
            with conn.cursor(row_factory=_user_note_row, binary=True) as cur:
                cur.execute(statement, (start, end, parts, part), prepare=True)
                return cur.fetchall(), end + 1
        except psycopg.DataError as error:
            message = f"the database cannot read an event's clear part: {error}"
            raise Unpartitionable(message) from error

    return read


def _part_statement(table: Composed) -> Composed:
    # OFFSET 0 keeps the user expression evaluated once per row (not again for the output).
    return SQL(
        "SELECT * FROM (SELECT notification_id, originator_id, originator_version, topic, state,"
        " {} ->> 'user_id' AS user_id FROM {}"
        " WHERE notification_id >= %s AND notification_id <= %s"
        " ORDER BY notification_id OFFSET 0) AS e"
        " WHERE (hashtext(coalesce(user_id, '')) & 2147483647) %% %s = %s"
        " ORDER BY notification_id"
    ).format(clear_json(Identifier("state")), table)


def _user_note_row(cursor: Any) -> Callable[[Sequence[Any]], _UserNote]:
    return _UserNote._make


def _same_users(notes: Sequence[Any], batch: list[Envelope]) -> None:
    """Every decoded event belongs to the user the database split it by."""
    for note, envelope in zip(notes, batch, strict=True):
        if getattr(envelope.event, "user_id", note.user_id) != note.user_id:
            raise Unpartitionable(f"the event at {note.id} names another user when decoded")
