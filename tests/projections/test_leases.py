"""Workers of one name share the ledger's partitions through leases (projections/leases.py):
they split them, rebalance when one joins, take over a stopped one's, and apply every event
exactly once. The same with processes killed under load: tests/faults/test_takeover.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import pack
from domain.model.values import Scope
from projections.leases import Leases, holders, share, unheld
from projections.tracking import Tables, read_positions
from projections.worker import ProjectionWorker

pytestmark = pytest.mark.integration


def until(what: Callable[[], bool], timeout: float) -> float:
    """Seconds until `what()` held (AssertionError after `timeout`)."""
    started = time.monotonic()
    while not what():
        assert time.monotonic() - started < timeout, f"not within {timeout}s"
        time.sleep(0.05)
    return time.monotonic() - started


def write(ledger: MemoryLedger, n: int, prefix: str = "u") -> list[str]:
    """n memories of n // 2 + 1 users (spread over the partitions); their ids."""
    return [
        str(
            ledger.create_memory(
                f"{prefix}{i % (n // 2 + 1)}",
                scope=Scope.global_(),
                memory_key=f"k{i}",
                content=f"fact {i}",
                category="fact",
            ).memory.memory_id
        )
        for i in range(n)
    ]


def exactly_once(ledger: MemoryLedger, database_url: str, schema: str, ids: list[str]) -> None:
    """Every event in the audit log once, every memory active once, every tracking row at
    its partition's head."""
    t = Tables(schema)
    heads = ledger.recorder.heads()
    with psycopg.connect(database_url) as conn:
        audit = [
            r[0] for r in conn.execute(sql.SQL("SELECT position FROM {}").format(t["audit_log"]))
        ]
        active = [
            str(r[0])
            for r in conn.execute(sql.SQL("SELECT memory_id FROM {}").format(t["active_memories"]))
        ]
        positions = read_positions(conn, t)
    expected = {pack(p, local) for p, head in heads.items() for local in range(1, head + 1)}
    assert sorted(audit) == sorted(expected)
    assert sorted(active) == sorted(ids)
    for name in {name for name, _ in positions}:
        behind = {p: h for p, h in heads.items() if positions.get((name, p), 0) != h}
        assert not behind, (name, behind)


def test_a_fair_share_covers_every_partition() -> None:
    assert [share(32, n) for n in (0, 1, 2, 3, 5, 40)] == [32, 32, 16, 11, 7, 1]
    assert all(share(p, n) * n >= p for p in (1, 8, 32) for n in range(1, 40))


def test_two_members_split_the_partitions_and_one_takes_over_what_the_other_gives_back(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    partitions = ledger.recorder.partitions
    first = psycopg.connect(database_url, autocommit=True)
    second = psycopg.connect(database_url, autocommit=True)
    try:
        a = Leases(first, pg_schema, "w", partitions)
        b = Leases(second, pg_schema, "w", partitions)
        assert a.refresh() == frozenset(range(partitions))  # alone: all of them
        assert b.refresh() == frozenset()  # none free yet
        assert len(a.refresh()) == share(partitions, 2)  # gives back what is above its share
        assert len(b.refresh()) == partitions - share(partitions, 2)
        assert not a.owned & b.owned
        held = holders(first, pg_schema, "w", partitions)
        assert [len(h.partitions) for h in held] == [partitions // 2] * 2
        assert not unheld(partitions, held)
        second.close()  # as a killed process: the session ends (soon), its locks with it
        until(lambda: a.refresh() == frozenset(range(partitions)), 5)
    finally:
        first.close()
        second.close()


def test_groups_of_other_names_and_schemas_do_not_share(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    partitions = ledger.recorder.partitions
    with (
        psycopg.connect(database_url, autocommit=True) as one,
        psycopg.connect(database_url, autocommit=True) as two,
        psycopg.connect(database_url, autocommit=True) as three,
    ):
        assert len(Leases(one, pg_schema, "w", partitions).refresh()) == partitions
        assert len(Leases(two, pg_schema, "other", partitions).refresh()) == partitions
        assert len(Leases(three, f"{pg_schema}x", "w", partitions).refresh()) == partitions


def test_running_workers_split_the_partitions_and_apply_every_event_once(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
) -> None:
    partitions = ledger.recorder.partitions
    first, second = make_worker(idle_wait=0.2), make_worker(idle_wait=0.2)
    first.start()
    second.start()
    ids = write(ledger, 60)
    # Whichever joined first took them all, and gave half back on its next turn.
    until(lambda: sorted([len(first.owned), len(second.owned)]) == [partitions // 2] * 2, 10)
    assert not first.owned & second.owned
    ids += write(ledger, 60, prefix="v")
    heads = ledger.recorder.heads()
    target = max(heads, key=lambda p: heads[p])
    assert first.wait(pack(target, heads[target]), timeout=10)  # whoever holds it
    assert second.wait(pack(target, heads[target]), timeout=10)
    until(lambda: max(s.lag for s in first.status()) == 0, 10)
    exactly_once(ledger, database_url, pg_schema, ids)
    second.stop()
    waited = until(lambda: len(first.owned) == partitions, 5)
    assert waited < 5
    ids += write(ledger, 20, prefix="w")
    until(lambda: max(s.lag for s in first.status()) == 0, 10)
    exactly_once(ledger, database_url, pg_schema, ids)


def test_a_worker_joining_gets_its_share(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> None:
    partitions = ledger.recorder.partitions
    first = make_worker(idle_wait=0.2)
    first.start()
    until(lambda: len(first.owned) == partitions, 10)
    joining = [make_worker(idle_wait=0.2), make_worker(idle_wait=0.2)]
    for worker in joining:
        worker.start()
    workers = [first, *joining]
    until(lambda: sum(len(w.owned) for w in workers) == partitions, 10)
    until(lambda: all(len(w.owned) <= share(partitions, 3) for w in workers), 10)
    assert len(first.holders()) == 3


def test_the_holder_of_partition_zero_sweeps_due_candidates(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], clock: Any
) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="goal",
        content="pass",
        category="goal",
    ).candidate
    clock.advance(days=31)
    first, second = make_worker(idle_wait=0.2), make_worker(idle_wait=0.2)
    first.start()
    second.start()
    until(lambda: ledger.get_candidate("alice", candidate.candidate_id).status == "expired", 10)
