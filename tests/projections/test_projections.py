"""Projections on PostgreSQL: exactly once, rebuildable from zero, shredding-aware, resilient."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.base import Projection
from projections.leases import Leases
from projections.reads import Reads
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.tracking import Tables
from projections.worker import ProjectionWorker
from tests.raw_events import insert_raw_event

LEARNING = Scope.workspace("learning")


def scenario(ledger: MemoryLedger, marker: str = "", prefix: str = "") -> dict[str, Any]:
    """A ledger with creates, updates, candidates, suppressions, forgets and a user erasure."""
    ids: dict[str, Any] = {}
    alice, bob = f"{prefix}alice", f"{prefix}bob"
    for user in (alice, bob):
        for i in range(4):
            ids[f"{user[len(prefix) :]}{i}"] = ledger.create_memory(
                user,
                scope=LEARNING if i % 2 else Scope.global_(),
                memory_key=f"k{i}",
                content=f"{user} fact {i} {marker}",
                category="preference",
            ).memory.memory_id
    ledger.update_memory(alice, ids["alice0"], expected_revision=1, content="tea, not coffee")
    ledger.put_global_memory(alice, memory_key="k0", content="green tea", category="preference")
    ledger.restore_version(alice, ids["alice0"], revision=1, expected_revision=3)
    ledger.suppress_memory(alice, ids["alice1"])
    ledger.suppress_memory(bob, ids["bob1"])
    ledger.restore_memory(bob, ids["bob1"])
    created = ledger.propose_candidate(
        alice,
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content=f"pass the exam {marker}",
        category="goal",
    ).candidate
    ledger.accept_candidate(alice, created.candidate_id, content=f"pass the exam in June {marker}")
    replace = ledger.propose_candidate(
        alice,
        operation="replace",
        scope=LEARNING,
        memory_key="k3",
        content=f"replacement {marker}",
        category="preference",
        target_memory_id=ids["alice3"],
    ).candidate
    rejected = ledger.propose_candidate(
        bob,
        operation="create",
        scope=Scope.global_(),
        memory_key="diet",
        content="vegan",
        category="fact",
    ).candidate
    ledger.reject_candidate(bob, rejected.candidate_id)
    ledger.forget_memory(alice, ids["alice3"])  # shreds the pending replace candidate too
    ledger.forget_memory(alice, ids["alice2"])
    ledger.change_settings(bob, auto_extract_enabled=False)
    ids["replace_candidate"] = replace.candidate_id
    return ids


def snapshot(database_url: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every projection table, sorted."""
    t = Tables(schema)
    tables = {logical for p in all_projections() for logical in p.tables}
    with psycopg.connect(database_url) as conn:
        return {
            logical: sorted(
                conn.execute(sql.SQL("TABLE {}").format(t[logical])).fetchall(), key=repr
            )
            for logical in sorted(tables)
        }


def test_projections_follow_the_ledger_and_forget_what_is_forgotten(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    marker = f"M{uuid.uuid4().hex}"
    ids = scenario(ledger, marker)
    worker.catch_up()
    rows = snapshot(database_url, pg_schema)
    active = {r[0]: r for r in rows["active_memories"]}
    assert ids["alice3"] not in active and ids["alice2"] not in active
    assert active[ids["alice1"]][9] == "suppressed"
    assert active[ids["alice0"]][10] == 4
    reads = Reads(
        worker.pool, pg_schema, worker.ledger.partition
    )  # key and content are stored sealed
    opened = reads.memory("alice", ids["alice0"])
    assert opened is not None and opened.content == f"alice fact 0 {marker}"
    assert f"alice fact 0 {marker}" not in repr(rows)
    assert [r[1] for r in rows["memory_versions"] if r[0] == ids["alice0"]] == [1, 2, 3, 4]
    assert {r[0] for r in rows["tombstones"]} == {ids["alice2"], ids["alice3"]}
    shredded = next(r for r in rows["candidates"] if r[0] == ids["replace_candidate"])
    assert shredded[7:9] == (b"", b"")  # sealed REDACTED
    forgotten_text = f"alice fact 2 {marker}"
    assert forgotten_text not in repr(rows) and f"replacement {marker}" not in repr(rows)
    audit_types = [r[2] for r in rows["audit_log"]]
    assert len(audit_types) == ledger.recorded()
    assert {
        "memory.created",
        "memory.updated",
        "memory.version_restored",
        "memory.suppressed",
        "memory.restored",
        "memory.deleted",
        "memory.candidate_created",
        "memory.candidate_accepted",
        "memory.candidate_rejected",
    } <= set(audit_types)
    assert all(marker not in repr(r) for r in rows["audit_log"])
    assert {r[0]: r[1] for r in rows["user_revisions"]}["bob"] == 6  # 4 creates, suppress, restore


def test_rebuild_from_zero_equals_the_live_tables(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    scenario(ledger)
    worker.catch_up()
    before = snapshot(database_url, pg_schema)
    report = rebuild(ledger, worker.pool, pg_schema, all_projections(), batch_size=7)
    assert report.identical, report.differences
    assert report.events == ledger.recorded()
    assert snapshot(database_url, pg_schema) == before
    scenario(ledger, "again", prefix="second-")  # the swapped-in tables keep following the ledger
    worker.catch_up()
    assert rebuild(ledger, worker.pool, pg_schema, all_projections()).identical


def test_rebuild_catches_up_a_lagging_live_projection(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
) -> None:
    scenario(ledger)
    lagging = make_worker()
    report = rebuild(ledger, lagging.pool, pg_schema, all_projections())
    # The live tables are first brought to the rebuild's position, then compared: equal.
    assert report.identical, report.differences
    heads = ledger.recorder.heads()  # type: ignore[attr-defined]
    assert lagging.positions() == {
        (p.name, partition): head for p in all_projections() for partition, head in heads.items()
    }
    reference = snapshot(database_url, pg_schema)
    assert rebuild(ledger, lagging.pool, pg_schema, all_projections()).identical
    assert snapshot(database_url, pg_schema) == reference


def test_a_crash_mid_batch_leaves_nothing_half_applied(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario(ledger)
    crashing = make_worker(batch_size=5)
    calls = {"n": 0}
    first = type(all_projections()[0])  # the projection each batch applies first
    original = first.apply

    def crash_on_third(self: Projection, cur: Any, t: Tables, batch: Any) -> None:
        calls["n"] += 1
        original(self, cur, t, batch)  # rows written, then it fails before the commit
        if calls["n"] == 3:
            raise psycopg.OperationalError("crash mid-batch")

    monkeypatch.setattr(first, "apply", crash_on_third)
    with pytest.raises(psycopg.OperationalError):
        crashing.catch_up()  # the connection's error: the batch stops, rolled back for the
        # projection that goes first, so no projection committed the third batch
    stood: dict[str, dict[int, int]] = {}
    for (name, partition), position in crashing.positions().items():
        if position:
            stood.setdefault(name, {})[partition] = position
    assert len({tuple(sorted(p.items())) for p in stood.values()}) == 1  # all stopped alike
    applied = sum(next(iter(stood.values())).values())
    assert 0 < applied <= 10 < ledger.recorded()  # two batches (of 5 at most) committed
    monkeypatch.undo()

    make_worker().catch_up()  # the restarted worker resumes where it stopped
    crashed = snapshot(database_url, pg_schema)
    assert rebuild(ledger, crashing.pool, pg_schema, all_projections()).identical
    assert snapshot(database_url, pg_schema) == crashed


def test_unknown_future_events_are_recorded_and_skipped(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
    )
    with psycopg.connect(database_url) as conn:  # in alice's partition, between her events
        insert_raw_event(
            conn, pg_schema, "memledger:Future.Thing", b"{}", partition=ledger.partition("alice")
        )
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k2", content="y", category="fact"
    )
    worker.catch_up()
    rows = snapshot(database_url, pg_schema)
    assert [r[2] for r in rows["audit_log"]] == ["memory.created", "unknown", "memory.created"]
    assert len(rows["active_memories"]) == 2


def test_read_your_writes_with_the_live_worker(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    worker.start()
    try:
        for i in range(5):
            outcome = ledger.create_memory(
                "alice",
                scope=Scope.global_(),
                memory_key=f"k{i}",
                content=f"fact {i}",
                category="fact",
            )
            assert worker.wait(outcome.position, timeout=5)
            with psycopg.connect(database_url) as conn:
                row = conn.execute(
                    sql.SQL("SELECT content FROM {} WHERE memory_id = %s").format(
                        Tables(pg_schema)["active_memories"]
                    ),
                    (outcome.memory.memory_id,),
                ).fetchone()
            assert row is not None
            seal, memory_id = Tables(pg_schema).seal, outcome.memory.memory_id
            opened = seal.open("active_memories", memory_id, memory_id, "content", row[0])
            assert opened == f"fact {i}"
            forgotten = ledger.forget_memory("alice", outcome.memory.memory_id)
            assert worker.wait(forgotten.position, timeout=5)
    finally:
        worker.stop()
    assert snapshot(database_url, pg_schema)["active_memories"] == []


def test_a_wait_for_what_this_worker_committed_reads_no_position(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
    )
    worker.catch_up()

    class NoQueries:
        def connection(self) -> Any:
            raise AssertionError("the positions were queried")

    worker.status_pool = worker.pool = NoQueries()  # type: ignore[assignment]
    assert worker.wait(outcome.position, timeout=0.1)
    assert worker.wait(outcome.position, timeout=0.1, names=["active_memories"])


def test_a_standby_worker_waits_for_what_another_worker_committed(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    applying, standby = make_worker(), make_worker()
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
    )
    assert not standby.wait(outcome.position, timeout=0.1)
    applying.catch_up()
    assert standby.wait(outcome.position, timeout=1)  # read from the tracking table
    later = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k2", content="y", category="fact"
    )
    assert not applying.wait(later.position, timeout=0.1)  # its own record is not enough


def test_a_worker_alone_holds_every_partition_and_gives_half_to_a_newcomer(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    first, second = make_worker(idle_wait=0.2), make_worker()
    first.start()
    try:
        outcome = ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
        )
        assert first.wait(outcome.position, timeout=5)
        partitions = first.partition_count()
        assert first.owned == frozenset(range(partitions))
        # A second member (leases only, not applying) gets what the first gives back.
        with psycopg.connect(second.pool.conninfo, autocommit=True) as conn:
            leases = Leases(conn, second.schema, second.group, partitions)
            deadline = time.monotonic() + 5
            while len(leases.refresh()) < partitions // 2:
                assert time.monotonic() < deadline, (leases.owned, first.owned)
                time.sleep(0.05)
            assert not leases.owned & first.owned
            assert len(first.owned) == partitions // 2
    finally:
        first.stop()


def test_status_reports_position_and_lag(ledger: MemoryLedger, worker: ProjectionWorker) -> None:
    scenario(ledger)
    assert {s.lag for s in worker.status()} == {ledger.recorded()}
    worker.catch_up()
    assert {s.lag for s in worker.status()} == {0}


def test_the_worker_expires_candidates_after_thirty_days(
    ledger: MemoryLedger, worker: ProjectionWorker, clock: Any
) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content="pass",
        category="goal",
    ).candidate
    worker.catch_up()
    assert worker.expire_due_candidates() == 0
    clock.advance(days=30)
    assert worker.expire_due_candidates() == 1
    worker.catch_up()
    assert ledger.get_candidate("alice", candidate.candidate_id).status == "expired"
    assert worker.expire_due_candidates() == 0


def test_a_partition_read_that_finds_nothing_below_its_head_is_reported_once_and_retried(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="tea", content="green tea", category="preference"
    ).memory
    worker = make_worker()
    recorder = ledger.recorder
    partition = ledger.partition("alice")
    read = recorder.read_partition
    misses = iter([True, True])  # two reads come back empty, as from a stale place

    def stale(part: int, after: int, limit: int, **options: Any) -> list[Any]:
        if part == partition and next(misses, False):
            return []
        return list(read(part, after, limit, **options))

    monkeypatch.setattr(recorder, "read_partition", stale)
    with caplog.at_level("WARNING", logger="projections.worker"):
        worker.catch_up()  # nothing read: the partition stays behind
        reads = Reads(worker.pool, pg_schema, ledger.partition)
        assert reads.memory("alice", memory.memory_id) is None
        worker.catch_up()  # again: not reported twice for the same position
        worker.catch_up()  # read now
    reported = [r.getMessage() for r in caplog.records if "could be read" in r.getMessage()]
    assert reported == [
        f"partition {partition}: its head is at 1 but no event after 0 could be read;"
        " its projections wait (retried every turn)"
    ]
    assert worker.status()[0].lag == 0
    assert reads.memory("alice", memory.memory_id) is not None
