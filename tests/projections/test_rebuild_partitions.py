"""A rebuild of a partitioned ledger: filled by partition, in one process or several, and checked
against live tables that stand at other positions in different partitions."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.applying import apply_batch
from projections.envelope import decode_batch
from projections.rebuild import rebuild
from projections.rebuild.processes import shares
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from tests.projections.test_projections import scenario, snapshot

PARTITIONS = 4


@pytest.fixture(autouse=True)
def few_partitions(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test's ledger schema is made with PARTITIONS partitions (read when it is created;
    autouse fixtures come before the ledger's)."""
    monkeypatch.setenv("MEMLEDGER_PARTITIONS", str(PARTITIONS))
    yield


def heads(ledger: MemoryLedger) -> dict[int, int]:
    return dict(ledger.recorder.heads())  # type: ignore[attr-defined]


def users_in_partitions(ledger: MemoryLedger, count: int, suffix: str = "") -> list[str]:
    """`count` user ids ending in `suffix`, each in a partition of its own (the partition is
    a keyed hash: found by trying)."""
    found: dict[int, str] = {}
    for i in itertools.count():
        user = f"user{i}{suffix}"
        found.setdefault(ledger.partition(user), user)
        if len(found) == count:
            return [found[p] for p in sorted(found)]
    raise AssertionError("unreachable")


def remember(ledger: MemoryLedger, user: str, count: int, tag: str) -> None:
    for i in range(count):
        ledger.create_memory(
            user,
            scope=Scope.global_(),
            memory_key=f"{tag}{i}",
            content=f"{tag} {i}",
            category="fact",
        )


def test_shares_split_the_partitions_with_events_by_how_many_each_holds() -> None:
    upto = {0: 100, 1: 10, 2: 0, 3: 60, 4: 50, 5: 5}
    split = shares(upto, 2)
    assert sorted(p for share in split for p in share) == [0, 1, 3, 4, 5]
    assert sorted(sum(upto[p] for p in share) for share in split) == [110, 115]
    assert shares(upto, 9) == [[0], [3], [4], [1], [5]]  # never more processes than partitions
    assert shares({0: 0}, 2) == []


def test_several_processes_fill_what_one_fills_and_both_equal_live(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    assert ledger.recorder.partitions == PARTITIONS  # type: ignore[attr-defined]
    for i, alice in enumerate(users_in_partitions(ledger, PARTITIONS, "-alice")):
        scenario(ledger, f"marker {i}", prefix=alice.removesuffix("alice"))
    assert all(heads(ledger).values())
    worker.catch_up()
    live = snapshot(database_url, pg_schema)
    seen: list[int] = []
    parallel = rebuild(
        ledger,
        worker.pool,
        pg_schema,
        all_projections(),
        batch_size=9,
        progress=seen.append,
        processes=3,  # one process gets two partitions
    )
    assert parallel.identical, parallel.differences
    assert parallel.events == sum(seen) == ledger.recorded()
    assert snapshot(database_url, pg_schema) == live
    alone = rebuild(ledger, worker.pool, pg_schema, all_projections(), batch_size=9, processes=1)
    assert alone.identical, alone.differences
    assert alone.events == parallel.events
    assert snapshot(database_url, pg_schema) == live


@pytest.mark.parametrize("processes", [1, 2])
def test_the_swap_brings_each_partition_to_whichever_side_is_ahead(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    database_url: str,
    pg_schema: str,
    processes: int,
) -> None:
    lagging, leading, steady = users_in_partitions(ledger, 3)
    for user in (lagging, leading, steady):
        remember(ledger, user, 5, "first")
    worker.catch_up()
    remember(ledger, lagging, 4, "unseen")  # live lags here: the rebuild's head is past it
    started = heads(ledger)
    written: list[int] = []

    def meanwhile(done: int) -> None:
        """While the fresh tables fill, a worker applies later events of one partition."""
        if written:
            return
        remember(ledger, leading, 3, "later")
        partition = ledger.partition(leading)
        notes = ledger.recorder.read_partition(partition, started[partition], 100)  # type: ignore[attr-defined]
        with worker.pool.connection() as conn:
            applied = apply_batch(
                conn, worker.projections, worker.tables, decode_batch(ledger.mapper, notes)
            )
        assert len(applied.done) == len(worker.projections)
        written.append(len(notes))

    report = rebuild(
        ledger,
        worker.pool,
        pg_schema,
        all_projections(),
        batch_size=2,
        progress=meanwhile,
        processes=processes,
    )
    assert written == [3]
    assert report.identical, report.differences
    assert report.events == sum(started.values())
    now = heads(ledger)
    assert worker.positions() == {
        (p.name, partition): now[partition] for p in all_projections() for partition in now
    }
    rebuilt = snapshot(database_url, pg_schema)
    assert worker.catch_up() == 0
    again = rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=processes)
    assert again.identical, again.differences
    assert snapshot(database_url, pg_schema) == rebuilt


def test_a_rebuild_while_the_worker_follows_writers_swaps_in_what_live_holds(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    users = users_in_partitions(ledger, PARTITIONS)
    for user in users:
        remember(ledger, user, 3, "first")
    worker.catch_up()
    stop, errors = threading.Event(), list[BaseException]()

    def write() -> None:
        try:
            for n in itertools.count():
                if stop.is_set():
                    return
                remember(ledger, users[n % len(users)], 1, f"meanwhile{n}-")
        except BaseException as error:
            errors.append(error)

    writer = threading.Thread(target=write)
    worker.start()
    writer.start()
    try:
        report = rebuild(
            ledger, worker.pool, pg_schema, all_projections(), batch_size=3, processes=2
        )
    finally:
        stop.set()
        writer.join()
        worker.stop()
    assert not errors
    assert report.identical, report.differences
    worker.catch_up()
    settled = snapshot(database_url, pg_schema)
    again = rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=1)
    assert again.identical, again.differences
    assert snapshot(database_url, pg_schema) == settled


@pytest.mark.parametrize("processes", [1, 2])
def test_a_rebuild_of_an_empty_ledger_swaps_in_empty_tables(
    ledger: MemoryLedger, worker: ProjectionWorker, pg_schema: str, processes: int
) -> None:
    worker.catch_up()
    report = rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=processes)
    assert report.identical and report.events == 0
