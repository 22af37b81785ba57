"""A data key that cannot be fetched while a batch is decoded is an outage, not an unreadable
event: the batch is raised and read again later, and no event of it is skipped for good."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eventsourcing import persistence

from domain.errors import LedgerUnavailable
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.key_table import KeyTable
from domain.model.values import Scope
from projections.envelope import decode_batch
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker


def down(*_: object) -> object:
    raise persistence.OperationalError("terminating connection due to administrator command")


def test_an_outage_while_decoding_is_raised_and_the_event_applied_once_it_is_over(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="style", content="examples first",
        category="preference",
    ).memory  # fmt: skip
    assert memory is not None
    worker = make_worker(all_projections())
    ledger.keys.forget_all_cached()  # as after a PostgreSQL restart: no cached key trusted
    monkeypatch.setattr(KeyTable, "wrapped", down)
    # The batch's up-front key read passed (the key table went down just after it): the
    # event's own key fetch is what meets the outage.
    monkeypatch.setattr(type(ledger.mapper.keys), "refresh", lambda *_, **__: None)

    recorder = ledger.store.recorder()
    notes = [n for p in range(recorder.partitions) for n in recorder.read_partition(p, 0, 10)]
    with pytest.raises((LedgerUnavailable, persistence.OperationalError)):
        decode_batch(ledger.mapper, notes)
    with pytest.raises((LedgerUnavailable, persistence.OperationalError)):
        worker.catch_up()  # the live worker's supervisor backs off and runs it again

    monkeypatch.undo()
    worker.catch_up()
    row = Reads(worker.pool, worker.schema, worker.ledger.partition).memory(
        "alice", memory.memory_id
    )
    assert row is not None and row.content == "examples first"
    assert not any(worker.quarantined().values())
