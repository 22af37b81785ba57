"""Given / when / then for aggregate tests: replay events, apply steps, read what was recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from eventsourcing.domain import Aggregate

__all__ = ["given", "replay", "state", "then"]

A = TypeVar("A", bound=Aggregate)


def replay(events: Iterable[Any]) -> Any:
    """The aggregate these events make, applied in order from nothing."""
    aggregate = None
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


def given(scratch: A, *steps: Callable[[A], Any]) -> A:
    """`scratch` after `steps`, rebuilt from all its events: a history, with none pending."""
    for step in steps:
        step(scratch)
    aggregate = replay(scratch.collect_events())
    assert isinstance(aggregate, type(scratch))
    return aggregate


def then(aggregate: Aggregate) -> list[Any]:
    """The events the command under test recorded."""
    return list(aggregate.collect_events())


def state(aggregate: Aggregate) -> dict[str, Any]:
    """Everything the aggregate holds, apart from its not-yet-collected events."""
    return {name: value for name, value in vars(aggregate).items() if name != "_pending_events"}
