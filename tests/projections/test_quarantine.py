"""An event a projection cannot apply is quarantined; the projection moves on (issue 13, 1).

Against PostgreSQL: the NUL a candidate's source_conversation_id may carry is refused by the
database when the candidates projection stores it; a handler may raise on one event. Either
way the event is set aside (no content recorded), the batch's other events are applied, the
position moves past it, and a rebuild sets aside the same events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.persistence import DataError as LibraryDataError
from eventsourcing.persistence import InterfaceError as LibraryInterfaceError
from eventsourcing.persistence import OperationalError as LibraryOperationalError
from eventsourcing.persistence import ProgrammingError as LibraryProgrammingError
from psycopg.sql import SQL

from domain.errors import LedgerUnavailable, MasterKeyMissing
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.base import Projection
from projections.failures import failure
from projections.quarantine import QUARANTINE, quarantined
from projections.rebuild import rebuild
from projections.registry import all_projections, main_projections
from projections.tracking import Tables
from projections.views.candidates import Candidates
from projections.worker import ProjectionWorker
from tests.poison import NUL_CONVERSATION, FailingActiveMemories, propose_with_nul

GLOBAL = Scope.global_()


def create(ledger: MemoryLedger, user: str, key: str, content: str) -> UUID:
    outcome = ledger.create_memory(
        user, scope=GLOBAL, memory_key=key, content=content, category="preference"
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def propose(ledger: MemoryLedger, user: str, key: str) -> UUID:
    outcome = ledger.propose_candidate(
        user,
        operation="create",
        scope=GLOBAL,
        memory_key=key,
        content=f"proposed {key}",
        category="preference",
    )
    assert outcome.candidate is not None
    return outcome.candidate.candidate_id


def totals(worker: ProjectionWorker) -> dict[str, int]:
    """Each projection's events applied: its positions in every partition added up (compared
    with `ledger.recorded()`: caught up)."""
    found: dict[str, int] = {}
    for (name, _), position in worker.positions().items():
        found[name] = found.get(name, 0) + position
    return found


def rows(worker: ProjectionWorker, table: str) -> list[dict[str, Any]]:
    with worker.pool.connection() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(SQL("SELECT * FROM {}").format(worker.tables[table])).fetchall()


def entries(worker: ProjectionWorker, t: Tables | None = None) -> list[tuple[Any, ...]]:
    with worker.pool.connection() as conn:
        found = quarantined(conn, t or worker.tables)
    return [(q.projection, q.position, q.topic, q.error_class, q.error_code) for q in found]


def test_a_nul_the_database_refuses_is_quarantined_and_the_rest_applied(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    before = propose(ledger, "alice", "before")
    poisoned = propose_with_nul(ledger, "alice")
    after = propose(ledger, "bob", "after")
    create(ledger, "bob", "tea", "green tea")
    worker = make_worker(main_projections())
    worker.catch_up()  # the poison, its neighbours and everything after: one batch
    assert totals(worker) == {p.name: ledger.recorded() for p in main_projections()}
    assert worker.wait(ledger.position("alice"), timeout=0.1)
    assert worker.wait(ledger.position("bob"), timeout=0.1)
    assert {r["candidate_id"] for r in rows(worker, "candidates")} == {before, after}
    [entry] = entries(worker)
    assert entry[:3] == ("candidates", poisoned, "memledger:MemoryCandidate.Proposed")
    assert entry[3] in {"DataError", "CharacterNotInRepertoire", "UntranslatableCharacter"}
    assert worker.quarantined()["candidates"] == 1
    # Nothing but ids, the topic and the error's class and code: no content, no message.
    with worker.pool.connection() as conn:
        stored = conn.execute(SQL("SELECT * FROM {}").format(worker.tables[QUARANTINE]))
        text = str(stored.fetchall())
    assert "secret" not in text and NUL_CONVERSATION not in text and "poison" not in text
    # The other projections applied the poisoned event as any other.
    assert any(r["position"] == poisoned for r in rows(worker, "audit_log"))
    # The projection keeps following the ledger past it.
    later = propose(ledger, "alice", "later")
    worker.catch_up()
    assert later in {r["candidate_id"] for r in rows(worker, "candidates")}
    assert len(entries(worker)) == 1


def test_a_handler_raising_on_one_event_quarantines_that_event_alone(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    ids = [create(ledger, "alice", f"note_{i}", f"memory {i}") for i in range(5)]
    worker = make_worker([FailingActiveMemories({ids[2]})], batch_size=1000)
    worker.catch_up()
    assert totals(worker) == {"active_memories": ledger.recorded()}
    assert {r["memory_id"] for r in rows(worker, "active_memories")} == set(ids) - {ids[2]}
    [entry] = entries(worker)
    assert entry[0] == "active_memories" and entry[3:] == ("ValueError", None)


@pytest.mark.parametrize(
    "unwell",
    [
        psycopg.errors.SerializationFailure("could not serialize access"),
        # Sealing the rows fetches data keys through the ledger, whose errors are the library's.
        LibraryOperationalError("couldn't get a connection after 5.00 sec"),
    ],
    ids=["database", "key fetch"],
)
def test_a_transient_error_retries_the_batch_and_quarantines_nothing(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], unwell: Exception
) -> None:
    ids = [create(ledger, "alice", f"note_{i}", f"memory {i}") for i in range(3)]

    class Unwell(FailingActiveMemories):
        def apply(self, cur: Any, t: Tables, batch: Any) -> None:
            if self.poison:
                self.poison.clear()
                raise unwell
            super().apply(cur, t, batch)

    worker = make_worker([Unwell({ids[0]})])
    if isinstance(unwell, psycopg.Error):  # the server refused it: this projection waits alone
        worker.catch_up()
        assert "active_memories" in worker._aside.held
        while not worker._aside.may_run("active_memories"):  # retried soon (0.1 s)
            time.sleep(0.02)
    else:
        with pytest.raises(type(unwell)):
            worker.catch_up()  # the worker's supervisor backs off and retries
    assert totals(worker).get("active_memories", 0) == 0 and entries(worker) == []
    worker.catch_up()
    assert {r["memory_id"] for r in rows(worker, "active_memories")} == set(ids)
    assert entries(worker) == []


def test_failures_are_classified() -> None:
    errors = psycopg.errors
    assert failure(errors.CharacterNotInRepertoire()) == "event"
    assert failure(errors.UniqueViolation()) == "event"
    assert failure(psycopg.DataError("NUL")) == "event"
    assert failure(KeyError("handler bug")) == "event"
    for transient in (
        errors.SerializationFailure(),
        errors.DeadlockDetected(),
        errors.LockNotAvailable(),
        errors.QueryCanceled(),
        errors.AdminShutdown(),
        psycopg.OperationalError("connection lost"),
        psycopg.InterfaceError("connection closed"),
        ConnectionResetError(),
        # What fetching a data key through the ledger raises when the database is unwell.
        LibraryOperationalError("the pool is closed"),
        LibraryInterfaceError("connection closed"),
        LedgerUnavailable("database unavailable: OperationalError"),
        MasterKeyMissing("master key 0123456789abcdef is not configured"),
    ):
        assert failure(transient) == "transient", transient
    wrapped = LibraryOperationalError("lost")
    wrapped.__cause__ = errors.UniqueViolation()
    assert failure(wrapped) == "event"  # the driver's error it wraps decides
    assert failure(LibraryDataError("bad value")) == "event"
    assert failure(LibraryProgrammingError("no such table")) == "broken"
    assert failure(errors.UndefinedTable()) == "broken"
    assert failure(errors.InternalError_()) == "broken"


def test_a_broken_projection_is_not_quarantined_and_holds_nothing_else_back(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    create(ledger, "alice", "tea", "green tea")

    class Broken(Candidates):
        def apply(self, cur: Any, t: Tables, batch: Any) -> None:
            raise psycopg.errors.UndefinedTable("relation does not exist")

    worker = make_worker([Broken(), *[p for p in main_projections() if p.name != "candidates"]])
    worker.catch_up()
    positions = totals(worker)
    assert positions.pop("candidates", 0) == 0 and entries(worker) == []
    assert set(positions.values()) == {ledger.recorded()}


@pytest.mark.parametrize("processes", [1, 2])
def test_rebuild_quarantines_the_same_events_and_completes(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    pg_schema: str,
    processes: int,
) -> None:
    propose(ledger, "alice", "before")
    propose_with_nul(ledger, "alice")
    propose(ledger, "bob", "after")
    live = make_worker(all_projections())
    live.catch_up()
    quarantined_live = entries(live)
    assert len(quarantined_live) == 1
    chosen: list[Projection] = [Candidates()]
    report = rebuild(ledger, live.pool, pg_schema, chosen, batch_size=2, processes=processes)
    assert report.identical, report.differences
    assert report.differences["quarantine/candidates"] == 0
    assert entries(live) == quarantined_live
    assert {r["status"] for r in rows(live, "candidates")} == {"pending"}
    assert len(rows(live, "candidates")) == 2


def test_rebuild_quarantines_on_its_own_when_the_live_projection_never_did(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], pg_schema: str
) -> None:
    ids = [create(ledger, "alice", f"note_{i}", f"memory {i}") for i in range(4)]
    live = make_worker(all_projections())
    live.catch_up()
    assert entries(live) == []
    report = rebuild(ledger, live.pool, pg_schema, [FailingActiveMemories({ids[1]})], processes=1)
    assert report.differences["quarantine/active_memories"] == 1  # the live one had none
    assert [e[0] for e in entries(live)] == ["active_memories"]
    assert {r["memory_id"] for r in rows(live, "active_memories")} == set(ids) - {ids[1]}
