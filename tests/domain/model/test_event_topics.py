"""Stored topics are explicit and stable: renaming a module or class must not break the ledger."""

from __future__ import annotations

from eventsourcing.domain import CanMutateAggregate
from eventsourcing.utils import get_topic, resolve_topic

from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings

STORED_TOPICS = {
    "memledger:Memory",
    "memledger:Memory.Created",
    "memledger:Memory.ContentChanged",
    "memledger:Memory.Updated",
    "memledger:Memory.Replaced",
    "memledger:Memory.VersionRestored",
    "memledger:Memory.Confirmed",
    "memledger:Memory.Suppressed",
    "memledger:Memory.Restored",
    "memledger:Memory.ScheduleChanged",
    "memledger:Memory.Forgotten",
    "memledger:MemoryCandidate",
    "memledger:MemoryCandidate.Proposed",
    "memledger:MemoryCandidate.Accepted",
    "memledger:MemoryCandidate.Rejected",
    "memledger:MemoryCandidate.Expired",
    "memledger:MemorySettings",
    "memledger:MemorySettings.Created",
    "memledger:MemorySettings.Changed",
    "memledger:MemorySettings.Erased",
}


def declared_topics() -> dict[str, type]:
    found: dict[str, type] = {}
    for aggregate in (Memory, MemoryCandidate, MemorySettings):
        found[aggregate.__dict__["TOPIC"]] = aggregate
        for name, value in vars(aggregate).items():
            if (
                isinstance(value, type)
                and issubclass(value, CanMutateAggregate)
                and name != "Event"
            ):
                found[value.__dict__["TOPIC"]] = value
    return found


def test_every_aggregate_and_event_declares_its_own_topic() -> None:
    assert set(declared_topics()) == STORED_TOPICS


def test_stored_topics_resolve_to_their_classes_without_module_paths() -> None:
    for topic, cls in declared_topics().items():
        assert get_topic(cls) == topic
        assert resolve_topic(topic) is cls
        assert cls.__module__ not in topic
