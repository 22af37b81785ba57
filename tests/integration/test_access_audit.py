"""Access audit on PostgreSQL: reads, searches and denials become ledger events and audit rows,
with ids, scopes, revisions and request ids, never content; written off the request path."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from eventsourcing.utils import get_topic, resolve_topic
from psycopg import sql

from api.access_log import AccessLog, AccessLogState
from domain.context import correlated
from domain.errors import InvalidInput, LedgerUnavailable
from domain.ledger.access import AccessEntry, AccessHit, denial_entry, result_entries
from domain.ledger.ledger import MemoryLedger
from domain.model.access import AccessRecord
from domain.model.values import Scope
from projections.tracking import Tables
from projections.worker import ProjectionWorker

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def audit_rows(database_url: str, schema: str, **where: Any) -> list[dict[str, Any]]:
    conditions = sql.SQL(" AND ").join(
        [sql.SQL("TRUE")] + [sql.SQL("{} = %s").format(sql.Identifier(k)) for k in where]
    )
    with psycopg.connect(database_url) as conn:
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        cur.execute(
            sql.SQL("SELECT * FROM {} WHERE {} ORDER BY position").format(
                Tables(schema)["audit_log"], conditions
            ),
            tuple(where.values()),
        )
        return cur.fetchall()


def stored_states(database_url: str, schema: str) -> list[bytes]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT state FROM {}.memledger_events WHERE topic LIKE %s").format(
                sql.Identifier(schema)
            ),
            ("memledger:AccessRecord%",),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


# -- the aggregate and the entries -------------------------------------------------------------


def test_access_records_have_stable_topics() -> None:
    assert get_topic(AccessRecord) == "memledger:AccessRecord"
    for cls, topic in (
        (AccessRecord.MemoryRead, "memledger:AccessRecord.MemoryRead"),
        (AccessRecord.MemorySearched, "memledger:AccessRecord.MemorySearched"),
        (AccessRecord.PolicyDenied, "memledger:AccessRecord.PolicyDenied"),
    ):
        assert get_topic(cls) == topic and resolve_topic(topic) is cls


def test_a_result_makes_one_entry_per_memory_in_rank_order() -> None:
    hits = [
        AccessHit(uuid.uuid4(), "global", None, 2),
        AccessHit(uuid.uuid4(), "workspace", "learning"),
    ]

    entries = result_entries(
        "search", user_id="alice", tool="t", workspace="learning", request_id="r", hits=hits, at=AT
    )

    assert [(e.memory_id, e.rank, e.count) for e in entries] == [
        (hits[0].memory_id, 1, 2),
        (hits[1].memory_id, 2, 2),
    ]
    assert [(e.scope_type, e.workspace_type, e.revision) for e in entries] == [
        ("global", None, 2),
        ("workspace", "learning", None),
    ]


def test_an_empty_result_is_one_entry_about_no_memory() -> None:
    [entry] = result_entries(
        "search", user_id="alice", tool="t", workspace="research", request_id=None, hits=[], at=AT
    )

    assert (entry.memory_id, entry.count, entry.workspace_type) == (None, 0, "research")


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "write"},
        {"user_id": ""},
        {"at": datetime(2026, 1, 1)},
        {"kind": "denied", "reason": ""},
        {"request_id": "x" * 129},
    ],
)
def test_invalid_entries_are_refused(fields: dict[str, Any]) -> None:
    base: dict[str, Any] = {"kind": "search", "user_id": "alice", "tool": "t", "at": AT}
    with pytest.raises(InvalidInput):
        AccessEntry(**(base | fields))


# -- the ledger and the audit projection -------------------------------------------------------


def test_recorded_accesses_become_audit_rows_without_content(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    marker = f"zq{uuid.uuid4().hex[:8]}"
    memory = ledger.create_memory(
        "alice",
        scope=Scope.workspace("learning"),
        memory_key=f"k_{marker}",
        content=f"I like {marker}",
        category="preference",
    ).memory
    assert memory is not None
    hit = AccessHit(memory.memory_id, "workspace", "learning", memory.revision)
    entries = [
        *result_entries(
            "search",
            user_id="alice",
            tool="search_core_memories",
            workspace="learning",
            request_id="req-s",
            hits=[hit],
            at=AT,
        ),
        *result_entries(
            "read",
            user_id="alice",
            tool="list_core_memories",
            workspace="learning",
            request_id="req-l",
            hits=[hit],
            at=AT,
        ),
        denial_entry(
            user_id="alice",
            tool="save_core_memory",
            workspace="learning",
            request_id="req-d",
            reason="no_write_mode",
            at=AT,
        ),
    ]

    position = ledger.record_access(entries)
    worker.catch_up()

    assert position == ledger.position("alice")
    rows = audit_rows(database_url, pg_schema, user_id="alice")
    access = [
        r
        for r in rows
        if r["event_type"] in ("memory.search", "memory.read", "memory.policy_denied")
    ]
    assert [(r["event_type"], r["request_id"], r["memory_id"]) for r in access] == [
        ("memory.search", "req-s", memory.memory_id),
        ("memory.read", "req-l", memory.memory_id),
        ("memory.policy_denied", "req-d", None),
    ]
    assert [(r["scope_type"], r["workspace_type"], r["revision"]) for r in access] == [
        ("workspace", "learning", 1),
        ("workspace", "learning", 1),
        (None, "learning", None),
    ]
    assert all(r["occurred_at"] == AT and r["content_hash"] is None for r in access)
    states = stored_states(database_url, pg_schema)
    assert len(states) == 3
    for state in states:
        assert marker not in state.decode()  # never content or keys
        assert set(json.loads(state)) >= {"user_id", "request_id", "tool", "workspace"}


def test_access_records_do_not_advance_the_memory_revision(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="tea", category="preference"
    )
    worker.catch_up()
    before = _revision(database_url, pg_schema, "alice")

    ledger.record_access(
        result_entries(
            "search",
            user_id="alice",
            tool="t",
            workspace="learning",
            request_id=None,
            hits=[],
            at=AT,
        )
    )
    worker.catch_up()

    assert _revision(database_url, pg_schema, "alice") == before == 1


def _revision(database_url: str, schema: str, user_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            sql.SQL("SELECT revision FROM {} WHERE user_id = %s").format(
                Tables(schema)["user_revisions"]
            ),
            (user_id,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_nothing_to_record_saves_nothing(ledger: MemoryLedger) -> None:
    head = ledger.recorded()

    assert ledger.record_access([]) is None and ledger.recorded() == head


def test_access_records_outlive_an_erasure_and_hold_only_ids(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    # Something to erase: a user the ledger has nothing of (access records aside) is NotFound.
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="tea", category="preference"
    )
    ledger.record_access(
        [
            denial_entry(
                user_id="alice",
                tool="t",
                workspace=None,
                request_id="r",
                reason="workspace_required",
                at=AT,
            )
        ]
    )
    ledger.erase_user("alice")
    worker.catch_up()

    [row] = audit_rows(database_url, pg_schema, event_type="memory.policy_denied")
    assert (row["user_id"], row["workspace_type"], row["request_id"]) == ("alice", None, "r")


# -- the background writer ---------------------------------------------------------------------


def test_the_access_log_writes_in_the_background_with_each_requests_id(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    log = AccessLog(ledger, interval=0.01)
    memory_id = uuid.uuid4()
    try:
        with correlated("req-one"):
            log.searched(
                "alice",
                "search_core_memories",
                "learning",
                [AccessHit(memory_id, "global", None, 3)],
            )
        with correlated("req-two"):
            log.denied("alice", "forget_core_memory", "learning", "no_write_mode")
        assert log.flush()
    finally:
        log.close()
    worker.catch_up()

    rows = audit_rows(database_url, pg_schema, user_id="alice")
    assert [(r["event_type"], r["request_id"], r["memory_id"]) for r in rows] == [
        ("memory.search", "req-one", memory_id),
        ("memory.policy_denied", "req-two", None),
    ]
    assert (log.written, log.dropped, log.pending) == (2, 0, 0)


def test_an_entry_recorded_after_the_writer_went_idle_is_written_within_the_interval(
    ledger: MemoryLedger,
) -> None:
    """The writer sleeps once the queue is empty: the next entry must wake it (no flush, no
    full batch), or a quiet server would keep it, unwritten, until a crash lost it."""
    log = AccessLog(ledger, interval=0.05)
    hits = [AccessHit(uuid.uuid4(), "global", None, 1)]
    try:
        for expected in (1, 2, 3):
            log.read("alice", "api.get_memory", None, hits)
            deadline = time.monotonic() + 5.0
            while log.written < expected and time.monotonic() < deadline:
                time.sleep(0.01)
            assert (log.written, log.pending) == (expected, 0)
            time.sleep(0.2)  # past the interval: the writer waits on an empty queue again
    finally:
        log.close()


def test_many_entries_are_written_in_batches(ledger: MemoryLedger) -> None:
    log = AccessLog(ledger, batch_size=100, interval=5.0)
    hits = [AccessHit(uuid.uuid4(), "global", None) for _ in range(20)]
    head = ledger.recorded()
    try:
        for _ in range(30):
            log.read("alice", "list_core_memories", "learning", hits)
        assert log.flush()
    finally:
        log.close()

    assert log.written == 600 and ledger.recorded() - head == 600


def test_close_flushes_and_stops_and_recording_again_restarts(ledger: MemoryLedger) -> None:
    log = AccessLog(ledger, interval=60.0)  # would linger a minute: close must not wait for it
    log.denied("alice", "t", "learning", "isolated_mode")
    log.close(timeout=10)

    assert log.written == 1 and log.pending == 0
    assert not any(t.name == "access-audit" and t.is_alive() for t in _threads_of(log))

    log.denied("alice", "t", "learning", "isolated_mode")
    assert log.flush() and log.written == 2
    log.close()


def _threads_of(log: AccessLog) -> Sequence[threading.Thread]:
    return [log._thread] if log._thread is not None else []


class FlakyLedger:
    """Fails `failures` times, then records (in memory)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.saved: list[AccessEntry] = []
        self.clock = lambda: AT

    def record_access(self, entries: Sequence[AccessEntry]) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise LedgerUnavailable("down")
        self.saved.extend(entries)
        return len(self.saved)


def test_a_failing_ledger_is_retried_then_the_batch_is_dropped_not_the_thread() -> None:
    ledger = FlakyLedger(failures=2)
    log = AccessLog(ledger, interval=0.01, retries=3)  # type: ignore[arg-type]
    log.denied("alice", "t", "learning", "isolated_mode")
    assert log.flush()
    assert len(ledger.saved) == 1 and log.dropped == 0

    ledger.failures = 10
    log.denied("alice", "t", "learning", "isolated_mode")
    assert log.flush() and log.dropped == 1
    assert log.state() == AccessLogState(written=1, dropped=1, pending=0)  # what /metrics shows

    ledger.failures = 0
    log.denied("alice", "t", "learning", "isolated_mode")
    assert log.flush() and len(ledger.saved) == 2
    log.close()


def test_a_full_queue_drops_instead_of_blocking() -> None:
    ledger = FlakyLedger(failures=0)
    log = AccessLog(ledger, max_queue=3, interval=60.0)  # type: ignore[arg-type]
    blocked = threading.Event()
    release = threading.Event()
    original = ledger.record_access

    def slow(entries: Sequence[AccessEntry]) -> int:
        blocked.set()
        release.wait(10)
        return original(entries)

    ledger.record_access = slow  # type: ignore[method-assign]
    log.batch_size = 1
    log.denied("alice", "t", None, "workspace_required")
    assert blocked.wait(10)  # the writer holds one entry; the queue has room for 3 more
    for _ in range(5):
        log.denied("alice", "t", None, "workspace_required")

    assert log.dropped == 2
    release.set()
    assert log.flush()
    assert len(ledger.saved) == 4
    log.close()


def test_recording_costs_microseconds_not_a_round_trip(ledger: MemoryLedger) -> None:
    log = AccessLog(ledger, interval=60.0)
    hits = [AccessHit(uuid.uuid4(), "global", None, 1) for _ in range(5)]
    started = datetime.now(UTC)
    for _ in range(1000):
        log.searched("alice", "search_core_memories", "learning", hits)
    elapsed = datetime.now(UTC) - started
    log.close()

    assert elapsed < timedelta(seconds=1)  # ~5,000 entries queued: far below one save each
    assert log.written == 5000
