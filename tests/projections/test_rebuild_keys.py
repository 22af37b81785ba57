"""A rebuild seals the views with its own ledger's key store only while it runs: afterwards the
process's worker seals with the key store it had (the rebuild's is closed with its ledger)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.rebuild import rebuild
from projections.registry import main_projections
from projections.sealed import seal_for
from projections.worker import ProjectionWorker


def create(ledger: MemoryLedger, key: str) -> Any:
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key=key, content=f"about {key}", category="fact"
    )
    return outcome.memory.memory_id


def test_after_a_rebuild_with_another_ledger_the_worker_seals_with_its_own_keys(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    make_ledger: Callable[..., MemoryLedger],
    pg_schema: str,
) -> None:
    create(ledger, "before")
    worker.catch_up()
    own = seal_for(pg_schema)

    rebuilding = make_ledger()  # as `memledger projections rebuild` beside a running worker
    rebuild(rebuilding, worker.pool, pg_schema, main_projections(), processes=1)
    rebuilding.close()

    assert seal_for(pg_schema) is own
    after = create(ledger, "after")
    worker.catch_up()  # seals the new row with the worker's keys, not the closed ones
    rows = Reads(worker.pool, pg_schema, worker.ledger.partition).memories("alice").items
    (row,) = [r for r in rows if r.memory_id == after]
    assert row.content == "about after"


def test_a_rebuild_loads_the_keys_of_a_batchs_users_with_the_batch(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    make_ledger: Callable[..., MemoryLedger],
    pg_schema: str,
    asked: list[set[UUID]],
) -> None:
    # Users of one partition: a batch holds events of one partition only.
    users = [u for u in (f"user{i}" for i in range(1000)) if ledger.partition(u) == 0][:5]
    assert len(users) == 5
    for user in users:
        ledger.create_memory(
            user, scope=Scope.global_(), memory_key="k", content=f"{user}'s", category="fact"
        )
    worker.catch_up()
    asked.clear()  # the queries of the rebuild alone
    rebuilding = make_ledger()  # a cold key cache
    report = rebuild(rebuilding, worker.pool, pg_schema, main_projections(), processes=1)
    rebuilding.close()
    assert report.identical
    user_keys = {user_key_id(user) for user in users}
    assert any(user_keys <= query for query in asked)  # all in one query
    assert not any(query <= user_keys for query in asked if len(query) == 1)  # none alone
