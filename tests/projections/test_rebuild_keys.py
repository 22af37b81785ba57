"""A rebuild seals the views with its own ledger's key store only while it runs: afterwards the
process's worker seals with the key store it had (the rebuild's is closed with its ledger)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    rows = Reads(worker.pool, pg_schema).memories("alice").items
    (row,) = [r for r in rows if r["memory_id"] == after]
    assert row["content"] == "about after"
