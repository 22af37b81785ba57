"""Aggregate loads read the user's partition only (persistence/routing.py).

The ledger loads a user's memory, candidate or settings inside `routing.within(partition)`, and
the recorder's `select_events` then names the partition: on Citus one shard answers
(tests/citus/test_routing.py reads the plan); here the meaning is pinned: the same events in
the right partition, nothing in any other, and every partition outside a hint.
"""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.application import AggregateNotFoundError

from domain.errors import NotFound
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence import routing
from domain.model.values import Scope

pytestmark = pytest.mark.integration


def test_a_hinted_load_reads_the_users_partition_and_nothing_elsewhere(
    ledger: MemoryLedger,
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="a fact", category="fact"
    ).memory
    assert memory is not None
    ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="a new fact")
    recorder = ledger.store.recorder()
    everywhere = recorder.select_events(memory.memory_id)
    mine = ledger.partition("alice")
    with routing.within(mine):
        assert routing.current() == mine
        assert recorder.select_events(memory.memory_id) == everywhere
        assert recorder.select_events(memory.memory_id, gt=1) == everywhere[1:]
        assert recorder.select_events(memory.memory_id, desc=True, limit=1) == everywhere[-1:]
        assert ledger.store.get(memory.memory_id).revision == 2  # type: ignore[attr-defined]
    assert routing.current() is None
    elsewhere = (mine + 1) % recorder.partitions
    with routing.within(elsewhere):
        assert recorder.select_events(memory.memory_id) == []
        with pytest.raises(AggregateNotFoundError):
            ledger.store.get(memory.memory_id)
    assert len(everywhere) == 2


def test_loads_through_the_ledger_name_the_owners_partition(
    ledger: MemoryLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="a fact", category="fact"
    ).memory
    assert memory is not None
    recorder = ledger.store.recorder()
    hints: list[int | None] = []
    select = recorder.select_events

    def spy(*args: Any, **kwargs: Any) -> Any:
        hints.append(routing.current())
        return select(*args, **kwargs)

    monkeypatch.setattr(recorder, "select_events", spy)
    assert ledger.store.memory("alice", memory.memory_id).id == memory.memory_id
    ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="new")
    ledger.change_settings("alice", saved_memory_enabled=False)
    assert ledger.store.settings("alice") is not None
    assert hints and set(hints) == {ledger.partition("alice")}
    with pytest.raises(NotFound):
        ledger.store.memory("bob", memory.memory_id)  # another user's: not found, wherever
