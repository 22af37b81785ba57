"""A rebuild filled by forked processes, each over a share of the partitions, equals the live
tables and a rebuild filled in one process."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest

from domain.ledger.ledger import MemoryLedger
from projections.rebuild import rebuild
from projections.rebuild.processes import can_partition, end_sessions
from projections.registry import all_projections, select
from projections.tracking import Tables
from projections.views.active_memories import ActiveMemories
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService
from tests.projections.test_projections import scenario, snapshot
from tests.raw_events import insert_raw_event

USERS = 8  # scenarios of two users each: both halves of the users get events


def many_users(ledger: MemoryLedger, tag: str = "") -> None:
    for i in range(USERS // 2):
        scenario(ledger, f"marker {i}", prefix=f"user{i}{tag}-")


def partitions_used(ledger: MemoryLedger) -> set[int]:
    """The partitions holding events."""
    return {partition for partition, head in ledger.recorder.heads().items() if head}  # type: ignore[attr-defined]


def fresh_tables(database_url: str, schema: str) -> list[str]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE %s",
            (schema, "%\\_\\_r%"),
        ).fetchall()
    return [row[0] for row in rows]


def test_two_processes_and_one_rebuild_the_live_tables(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    many_users(ledger)
    worker.catch_up()
    assert len(partitions_used(ledger)) > 2  # shares of more than one partition
    assert can_partition(ledger, all_projections())
    live = snapshot(database_url, pg_schema)
    seen: list[int] = []
    split = rebuild(
        ledger, worker.pool, pg_schema, all_projections(), batch_size=7, progress=seen.append
    )
    assert split.identical, split.differences
    assert split.events == sum(seen) == ledger.recorded()
    assert snapshot(database_url, pg_schema) == live
    alone = rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=1)
    assert alone.identical, alone.differences
    assert snapshot(database_url, pg_schema) == live


def test_an_event_of_a_newer_release_is_rebuilt_in_its_partition_as_live_applied_it(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    many_users(ledger)
    with psycopg.connect(database_url, autocommit=True) as conn:  # by no release of ours
        partition = ledger.partition("user0-alice")
        insert_raw_event(
            conn, pg_schema, "memledger:Future.Thing", b"\xff\xfe", partition=partition
        )
    many_users(ledger, "again")
    worker.catch_up()
    live = snapshot(database_url, pg_schema)
    assert "unknown" in [row[2] for row in live["audit_log"]]
    report = rebuild(ledger, worker.pool, pg_schema, all_projections(), batch_size=50)
    assert report.identical, report.differences
    assert report.events == ledger.recorded()
    assert snapshot(database_url, pg_schema) == live


class _Failing(ActiveMemories):
    def apply(self, cur: Any, t: Tables, batch: Any) -> None:
        super().apply(cur, t, batch)
        if any(e.local > 3 for e in batch):
            # Not one event's failure (that is quarantined): the projection cannot run.
            raise psycopg.errors.InternalError_("a projection failed in a rebuild process")


def test_a_failing_process_fails_the_rebuild_and_the_live_tables_stay(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    many_users(ledger)
    worker.catch_up()
    live = snapshot(database_url, pg_schema)
    projections = [p for p in all_projections() if p.name != ActiveMemories.name] + [_Failing()]
    with pytest.raises(RuntimeError, match="a projection failed in a rebuild process"):
        rebuild(ledger, worker.pool, pg_schema, projections, batch_size=10)
    assert snapshot(database_url, pg_schema) == live
    assert fresh_tables(database_url, pg_schema) == []
    assert rebuild(ledger, worker.pool, pg_schema, all_projections()).identical


def test_a_projection_calling_a_model_is_rebuilt_in_this_process(
    ledger: MemoryLedger, embedding_service: EmbeddingService
) -> None:
    with_model = select(["active_memories", "embeddings"], embedding_service)
    assert embedding_service.model_id is not None
    assert not can_partition(ledger, with_model)
    assert can_partition(ledger, select(["active_memories", "embeddings"]))


def test_ending_the_rebuild_sessions_stops_what_they_still_run(database_url: str) -> None:
    name = f"memledger-rebuild-test-{uuid.uuid4().hex[:8]}"
    errors: list[BaseException] = []

    def sleep_in_a_session() -> None:
        with psycopg.connect(database_url, autocommit=True, application_name=name) as conn:
            try:
                conn.execute("SELECT pg_sleep(60)")
            except psycopg.OperationalError as error:
                errors.append(error)

    sleeper = threading.Thread(target=sleep_in_a_session)
    sleeper.start()
    with psycopg.connect(database_url, autocommit=True) as conn:
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND state = 'active'"
        )
        for _ in range(500):
            if conn.execute(query, (name,)).fetchone() == (1,):
                break
            threading.Event().wait(0.01)
        else:
            pytest.fail("the sleeping session never started")
        end_sessions(database_url, {}, name, timeout=10)
        sleeper.join(timeout=10)
        assert not sleeper.is_alive()
        assert len(errors) == 1  # its statement was cut short, not left running
        remaining = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        assert conn.execute(remaining, (name,)).fetchone() == (0,)
