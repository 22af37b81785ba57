"""Sixteen writers racing on one partition and across partitions: every partition stays one
gap-free sequence 1..head, each user's events in one partition and in commit order, and a
save that loses (a key claim taken by another) leaves no gap behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from psycopg import sql

from domain.errors import KeyExists
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import local_of
from domain.model.values import Scope

WRITERS = 16
SAVES = 12


@pytest.fixture
def ledger(
    make_ledger: Callable[..., MemoryLedger], monkeypatch: pytest.MonkeyPatch
) -> MemoryLedger:
    monkeypatch.setenv("MEMLEDGER_PARTITIONS", "4")  # few partitions: writers share them
    return make_ledger(pool_size=WRITERS + 2)


def race(ledger: MemoryLedger, users: list[str], same_key: bool) -> list[Any]:
    barrier = threading.Barrier(WRITERS)

    def writer(w: int) -> list[Any]:
        barrier.wait()
        done: list[Any] = []
        for i in range(SAVES):
            key = "shared" if same_key else f"k{w}_{i}"
            try:
                done.append(
                    ledger.create_memory(
                        users[w % len(users)],
                        scope=Scope.global_(),
                        memory_key=key,
                        content=f"fact {w} {i}",
                        category="fact",
                    ).status
                )
            except KeyExists as lost:
                done.append(lost)
        return done

    with ThreadPoolExecutor(WRITERS) as pool:
        return [r for rs in pool.map(writer, range(WRITERS)) for r in rs]


def sequences(database_url: str, schema: str) -> tuple[dict[int, list[int]], dict[int, int]]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT partition, array_agg(position ORDER BY position) FROM {}.memledger_events"
                " GROUP BY partition"
            ).format(sql.Identifier(schema))
        ).fetchall()
        heads = conn.execute(
            sql.SQL("SELECT partition, position FROM {}.memledger_ledger_heads").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    return {p: list(ps) for p, ps in rows}, {p: h for p, h in heads}


def gap_free(database_url: str, schema: str) -> dict[int, list[int]]:
    found, heads = sequences(database_url, schema)
    assert len(heads) == 4
    for partition, head in heads.items():
        assert found.get(partition, []) == list(range(1, head + 1)), partition
    return found


@pytest.mark.parametrize("users", [["solo"], [f"u{i}" for i in range(WRITERS)]])
def test_writers_keep_every_partition_gap_free(
    ledger: MemoryLedger, database_url: str, pg_schema: str, users: list[str]
) -> None:
    results = race(ledger, users, same_key=False)
    assert results.count("created") == WRITERS * SAVES
    found = gap_free(database_url, pg_schema)
    assert sum(map(len, found.values())) == WRITERS * SAVES
    if len(users) > 1:
        assert len(found) > 1  # the users spread over several partitions
    for user in users:  # each user's events in their partition, their positions increasing
        partition = ledger.partition(user)
        assert ledger.memory_ids(user) and local_of(ledger.position(user)) == len(found[partition])


def test_lost_claims_leave_no_gap(ledger: MemoryLedger, database_url: str, pg_schema: str) -> None:
    results = race(ledger, ["solo"], same_key=True)
    assert results.count("created") == 1  # one memory holds the key, the rest lost or matched
    gap_free(database_url, pg_schema)
