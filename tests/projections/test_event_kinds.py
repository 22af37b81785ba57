"""Event classes sorted once per class, whatever the answer, and sorted as each table means."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from domain.model.access import AccessRecord
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from projections.envelope import Envelope, EventKinds
from projections.views import audit_log, memory_versions

EVENT_CLASSES = sorted(
    {
        value
        for aggregate in (Memory, MemoryCandidate, MemorySettings, AccessRecord)
        for value in vars(aggregate).values()
        if isinstance(value, type) and issubclass(value, aggregate.Event)
    },
    key=lambda cls: cls.__qualname__,
)


class _Counting(type):
    checks = 0

    def __subclasscheck__(cls, subclass: type) -> bool:
        _Counting.checks += 1
        return super().__subclasscheck__(subclass)


class Base(metaclass=_Counting):
    pass


class Derived(Base):
    pass


@pytest.mark.parametrize("default", [None, 0, "", ("unknown", 2)])
def test_every_answer_is_cached_the_default_included(default: Any) -> None:
    kinds = EventKinds([(Base, "base")], default)
    assert kinds(Derived) == "base" and kinds(int) == default and kinds(type(None)) == default
    checks = _Counting.checks
    assert [kinds(Derived), kinds(int), kinds(type(None))] == ["base", default, default]
    assert _Counting.checks == checks


def test_the_domain_has_the_event_classes_these_tests_walk() -> None:
    assert {Memory.Created, Memory.Updated, Memory.Forgotten, MemoryCandidate.Proposed} <= set(
        EVENT_CLASSES
    )
    assert set(audit_log.EVENT_TYPES) <= set(EVENT_CLASSES)


@pytest.mark.parametrize("cls", [*EVENT_CLASSES, type(None)], ids=lambda c: c.__qualname__)
def test_version_kinds(cls: type) -> None:
    expected = None
    if issubclass(cls, Memory.Created):
        expected = "create"
    elif issubclass(cls, Memory.ContentChanged):
        names = {Memory.Replaced: "replace", Memory.VersionRestored: "restore"}
        expected = names.get(cls, "update")
    elif issubclass(cls, Memory.Forgotten):
        expected = "forget"
    assert memory_versions._KINDS(cls) == expected


@pytest.mark.parametrize("cls", [*EVENT_CLASSES, type(None)], ids=lambda c: c.__qualname__)
def test_audit_names_and_families(cls: type) -> None:
    name = audit_log.EVENT_TYPES.get(cls, "unknown")
    family = (
        audit_log._MEMORY
        if issubclass(cls, Memory.Event)
        else audit_log._CANDIDATE
        if issubclass(cls, MemoryCandidate.Event)
        else audit_log._OTHER
    )
    assert audit_log._KINDS(cls) == (name, family)


def test_an_unreadable_event_is_audited_as_unknown() -> None:
    assert audit_log.event_type(Envelope(1, uuid4(), 1, "memledger:Future", None)) == "unknown"
