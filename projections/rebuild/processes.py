"""Filling a rebuild's fresh tables from several processes at once, each over a share of the
ledger's partitions.

One process cannot go faster than one core (the GIL holds decoding, every projection's rows
and psycopg's encoding alike). A user's events are all in one partition, and every
projection's rows of a user depend on that user's events alone (a candidate is shredded by its
own user's forget; a revision counts its user's changes): so each forked process reads whole
partitions (`shares`: about as many events each), decodes them with keys it fetches itself,
and applies them in each partition's order to the same fresh tables, touching rows no other
process touches. The parent relays progress and, once every process is done, the tables are
complete up to the same positions as a single process would leave them; their indexes are
built after.

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
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.sql import SQL

from domain.ledger.ledger import MemoryLedger
from projections.base import Projection
from projections.rebuild.lanes import Fill, fill_lanes
from projections.rebuild.reading import connection_reader, events_table
from projections.sealed import TERM_MEMO, register

__all__ = ["can_partition", "end_sessions", "fill_partitioned", "shares"]

_PR_SET_PDEATHSIG = 1  # prctl(2)


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
    """Do `fill` from at most `processes` forked processes, each over a share of its
    partitions (`shares`).

    Returns how many events they applied together. Raises RuntimeError with the child's
    traceback when a process failed; the children's server sessions have ended first
    (`end_sessions`), so none of their statements can still run once it raises.
    """
    context = multiprocessing.get_context("fork")
    children: list[tuple[multiprocessing.process.BaseProcess, Pipe]] = []
    sessions = f"memledger-rebuild-{secrets.token_hex(6)}"  # the children's application_name
    child_kwargs = {**kwargs, "application_name": sessions}
    finished = False
    try:
        for part, partitions in enumerate(shares(fill.upto, processes)):
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(
                target=_child,
                args=(ledger, conninfo, child_kwargs, fill.share(partitions)),
                kwargs={"sender": sender, "parent": os.getpid()},
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


def shares(upto: Mapping[int, int], processes: int) -> list[list[int]]:
    """The partitions with events split into at most `processes` shares of about as many
    events each (the largest partition first, to the share with the fewest so far)."""
    loads: list[tuple[int, list[int]]] = []
    for partition, events in sorted(upto.items(), key=lambda item: (-item[1], item[0])):
        if events <= 0:
            continue
        if len(loads) < processes:
            loads.append((events, [partition]))
        else:
            least = min(range(len(loads)), key=lambda i: loads[i][0])
            total, share = loads[least]
            loads[least] = (total + events, [*share, partition])
    return [sorted(share) for _, share in loads]


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
            else:
                raise RuntimeError(f"rebuild process failed:\n{value}")
    return total


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
    sender: Pipe,
    parent: int,
) -> None:
    """Apply this process's partitions; report progress, then the count or the error."""
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
            table = events_table(ledger)
            assert table is not None  # can_partition
            done = fill_lanes(
                connection_reader(reading, table),
                ledger.mapper.with_keys(keys),
                conn,
                connect,
                fill,
                lambda n: sender.send(("progress", n)),
                two_lanes=False,
            )
        sender.send(("done", done))
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
