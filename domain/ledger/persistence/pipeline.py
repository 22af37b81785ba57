"""One write as one libpq pipeline of prepared statements: one round trip, plans made once.

`run(conn, steps)` (a `Transaction`'s steps) sends BEGIN, the steps and COMMIT back to back
with a single Sync and returns the steps' results; a failing step's error is raised as psycopg
raises it, after the transaction was rolled back. Each `Statement` has `$1`.. placeholders of
declared types (`oid("uuid")`, `oid("text[]")`) and is prepared once per connection. The
connection must be idle and in autocommit mode; it is left so. Named prepared statements need a
session of one's own (not PgBouncer transaction pooling older than 1.21). Why it is built this
way, and what it measured: docs/ledger.md.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import psycopg
from psycopg import abc, errors, pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.postgres import types
from psycopg.waiting import Ready, Wait

__all__ = ["Statement", "Transaction", "oid", "run"]

_BINARY: Final = pq.Format.BINARY
_COMMAND_OK: Final = pq.ExecStatus.COMMAND_OK
_PIPELINE_SYNC: Final = pq.ExecStatus.PIPELINE_SYNC
_FATAL_ERROR: Final = pq.ExecStatus.FATAL_ERROR
_IDLE: Final = pq.TransactionStatus.IDLE


def oid(type_name: str) -> int:
    """The oid of a built-in PostgreSQL type, e.g. "uuid" or "text[]"."""
    info = types.get(type_name.removesuffix("[]"))
    if info is None:
        raise LookupError(f"unknown type {type_name}")
    return info.array_oid if type_name.endswith("[]") else info.oid


_per_thread = threading.local()


@dataclass(frozen=True)
class Statement:
    """A statement with `$1`.. placeholders of the given types, prepared on first use."""

    text: bytes
    param_types: tuple[int, ...] = ()
    name: bytes = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(self.text + repr(self.param_types).encode()).hexdigest()
        object.__setattr__(self, "name", b"mlw_" + digest[:24].encode())

    def dump(self, params: Sequence[Any]) -> Sequence[Any]:
        """The parameters in binary, by the statement's declared types."""
        if len(params) != len(self.param_types):
            raise ValueError(f"{len(self.param_types)} parameters expected, got {len(params)}")
        if not params:
            return ()
        # A Transformer set up for these types, one per thread (it caches dumpers, so it is
        # not shared): building one per call is costly (docs/ledger.md).
        transformers: dict[bytes, tuple[abc.Transformer, list[PyFormat]]] | None
        transformers = getattr(_per_thread, "transformers", None)
        if transformers is None:
            transformers = _per_thread.transformers = {}
        cached = transformers.get(self.name)
        if cached is None:
            tx = Transformer(None)
            tx.set_dumper_types(self.param_types, _BINARY)
            cached = transformers[self.name] = (tx, [PyFormat.BINARY] * len(params))
        return cached[0].dump_sequence(params, cached[1])


class Transaction:
    """The statements of one write, in order, each with its parameters (`run`'s steps)."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[Statement, tuple[Any, ...]]] = []

    def add(self, statement: Statement, *params: Any) -> None:
        """Append one statement; `params` fill its placeholders in order."""
        self.steps.append((statement, params))


_BEGIN: Final = Statement(b"BEGIN")
_COMMIT: Final = Statement(b"COMMIT")
# The statements known to be prepared on each connection (gone with the connection).
_prepared: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


def run(
    conn: psycopg.Connection[Any], steps: Sequence[tuple[Statement, Sequence[Any]]]
) -> list[pq.abc.PGresult]:
    """Run the steps in one transaction and one round trip; their results, in order.

    The first failing statement's error is raised as psycopg raises it (IntegrityError with
    its diagnostics, LockNotAvailable, ...), after the transaction was rolled back. The
    connection must be idle and in autocommit mode; it is left so, whatever happens.
    """
    try:
        return _run_once(conn, steps)
    except errors.InvalidSqlStatementName:
        _prepared.pop(conn.pgconn, None)  # deallocated behind our back: prepare again
        return _run_once(conn, steps)


def _run_once(
    conn: psycopg.Connection[Any], steps: Sequence[tuple[Statement, Sequence[Any]]]
) -> list[pq.abc.PGresult]:
    pgconn = conn.pgconn
    known = _prepared.setdefault(pgconn, set())
    # Every parameter is dumped before anything is queued: a value that cannot be dumped
    # fails the write here, with nothing sent and the connection untouched (queued after
    # BEGIN, with no Sync to answer, it left `_leave_pipeline` spinning forever).
    plan = [
        (statement, statement.dump(params) if statement.param_types or params else None)
        for statement, params in [(_BEGIN, ()), *steps, (_COMMIT, ())]
    ]
    sent: list[Statement | None] = []  # in reply order: None for a prepare of the next one
    synced = False
    pgconn.enter_pipeline_mode()
    try:
        for statement, dumped in plan:
            if statement.name not in known and statement not in sent:
                pgconn.send_prepare(statement.name, statement.text, statement.param_types or None)
                sent.append(None)
            if dumped is not None:
                pgconn.send_query_prepared(statement.name, dumped, [_BINARY] * len(dumped))
            else:
                pgconn.send_query_prepared(statement.name, None, None)
            sent.append(statement)
        pgconn.pipeline_sync()
        synced = True
        results = conn.wait(_communicate(pgconn))
        # Every result up to the Sync was read: leaving the mode needs no more reading
        # (`_leave_pipeline`'s draining would cost a recv per save).
        pgconn.exit_pipeline_mode()
    finally:
        if pgconn.pipeline_status != pq.PipelineStatus.OFF:
            _leave_pipeline(conn, synced=synced)
    replies: list[pq.abc.PGresult] = []
    for n, (reply_to, result) in enumerate(zip(sent, results, strict=True)):
        if reply_to is not None:
            replies.append(result)
        elif result.status == _COMMAND_OK:  # prepared (it lasts: prepares are not rolled back)
            known.add(cast(Statement, sent[n + 1]).name)
    failed = next((r for r in replies if r.status == _FATAL_ERROR), None)
    if failed is not None or pgconn.transaction_status != _IDLE:
        _rollback(pgconn)
        if failed is None:
            raise psycopg.InternalError("the write left its transaction open")
        raise errors.error_from_result(failed, encoding=conn.info.encoding)
    return replies[1:-1]


def _communicate(pgconn: pq.abc.PGconn) -> Generator[Wait, Ready | int, list[pq.abc.PGresult]]:
    """Flush what was queued, then read every result up to the pipeline's Sync."""
    while pgconn.flush() != 0:
        ready = yield Wait.RW
        if ready & Ready.R:
            pgconn.consume_input()
    results: list[pq.abc.PGresult] = []
    while True:
        while pgconn.is_busy():
            if (yield Wait.R) & Ready.R:
                pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:  # the end of one statement's results
            continue
        if result.status == _PIPELINE_SYNC:
            return results
        results.append(result)


def _leave_pipeline(conn: psycopg.Connection[Any], *, synced: bool) -> None:
    """After an interrupted run: drain what is left, so the connection can leave the mode.

    Without a Sync sent, the server answers nothing more: one is sent first, so the draining
    ends (and the statements already queued, BEGIN included, are run and then rolled back).
    """
    pgconn = conn.pgconn
    try:
        if pgconn.status == pq.ConnStatus.OK:
            if not synced:
                pgconn.pipeline_sync()
                conn.wait(_communicate(pgconn))
            else:
                while pgconn.get_result() is not None or pgconn.is_busy():
                    pgconn.consume_input()
            pgconn.exit_pipeline_mode()
            _rollback(pgconn)
    except psycopg.Error:
        pass
    if pgconn.pipeline_status != pq.PipelineStatus.OFF or (
        pgconn.status == pq.ConnStatus.OK and pgconn.transaction_status != _IDLE
    ):
        pgconn.finish()  # unusable: the pool discards a closed connection


def _rollback(pgconn: pq.abc.PGconn) -> None:
    # At the libpq level: psycopg would deallocate every prepared statement after seeing it.
    if pgconn.status == pq.ConnStatus.OK and pgconn.transaction_status != _IDLE:
        pgconn.exec_(b"ROLLBACK")
