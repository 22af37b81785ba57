"""Concurrent writers on one memory or one key: no lost update, no duplicate, no lost event."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from domain.errors import KeyExists, MemoryForgotten, RevisionConflict
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope

WRITERS = 20


@pytest.fixture
def ledger(make_ledger: Callable[..., MemoryLedger]) -> MemoryLedger:
    """A ledger with a connection for every racing writer."""
    return make_ledger(pool_size=WRITERS + 2)


def race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Start all calls at the same moment; return each result or the exception it raised."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], Any]) -> Any:
        barrier.wait()
        try:
            return call()
        except Exception as error:
            return error

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def kinds(results: list[Any]) -> Counter[str]:
    return Counter(type(r).__name__ if isinstance(r, Exception) else r.status for r in results)


def create(ledger: MemoryLedger, content: str, user: str = "alice", key: str = "study_time") -> Any:
    return ledger.create_memory(
        user,
        scope=Scope.workspace("learning"),
        memory_key=key,
        content=content,
        category="constraint",
    )


def test_twenty_updates_at_the_same_revision_leave_one_winner(ledger: MemoryLedger) -> None:
    memory = create(ledger, "one hour a day").memory
    results = race(
        [
            lambda i=i: ledger.update_memory(
                "alice", memory.memory_id, expected_revision=1, content=f"{i + 2} hours a day"
            )
            for i in range(WRITERS)
        ]
    )
    assert kinds(results) == {"updated": 1, "RevisionConflict": WRITERS - 1}
    assert all(r.current_revision == 2 for r in results if isinstance(r, RevisionConflict))
    winner = next(r for r in results if not isinstance(r, Exception))
    current = ledger.get_memory("alice", memory.memory_id)
    assert current.revision == 2 and current.content == winner.memory.content
    events = list(ledger.events.get(memory.memory_id))
    assert [e.originator_version for e in events] == [1, 2]


def test_twenty_creates_of_the_same_key_make_one_memory(ledger: MemoryLedger) -> None:
    results = race([lambda: create(ledger, "one hour a day") for _ in range(WRITERS)])
    assert kinds(results) == {"created": 1, "unchanged": WRITERS - 1}
    assert len({r.memory.memory_id for r in results}) == 1
    assert len(ledger.memory_ids("alice")) == 1


def test_twenty_creates_with_different_values_never_overwrite(ledger: MemoryLedger) -> None:
    results = race([lambda i=i: create(ledger, f"{i} hours a day") for i in range(WRITERS)])
    assert kinds(results) == {"created": 1, "KeyExists": WRITERS - 1}
    winner = next(r for r in results if not isinstance(r, Exception))
    assert all(r.memory_id == winner.memory.memory_id for r in results if isinstance(r, KeyExists))
    assert ledger.get_memory("alice", winner.memory.memory_id).content == winner.memory.content


def test_creates_from_two_processes_share_one_uniqueness(
    make_ledger: Callable[..., MemoryLedger],
) -> None:
    first, second = make_ledger(pool_size=WRITERS), make_ledger(pool_size=WRITERS)
    results = race(
        [lambda i=i: create(first if i % 2 else second, "one hour a day") for i in range(WRITERS)]
    )
    assert kinds(results) == {"created": 1, "unchanged": WRITERS - 1}


def test_same_key_in_different_scopes_and_users_are_different_memories(
    ledger: MemoryLedger,
) -> None:
    results = race(
        [
            lambda: create(ledger, "one hour", user="alice"),
            lambda: create(ledger, "one hour", user="bob"),
            lambda: ledger.create_memory(
                "alice",
                scope=Scope.global_(),
                memory_key="study_time",
                content="one hour",
                category="constraint",
            ),
            lambda: ledger.create_memory(
                "alice",
                scope=Scope.workspace("research"),
                memory_key="study_time",
                content="one hour",
                category="constraint",
            ),
        ]
    )
    assert kinds(results) == {"created": 4}


def test_forget_racing_updates_never_resurrects_content(ledger: MemoryLedger) -> None:
    memory = create(ledger, "one hour a day").memory
    calls: list[Callable[[], Any]] = [
        lambda i=i: ledger.update_memory(
            "alice", memory.memory_id, expected_revision=1, content=f"v{i}"
        )
        for i in range(WRITERS - 1)
    ]
    calls.append(lambda: ledger.forget_memory("alice", memory.memory_id))
    results = race(calls)
    counts = kinds(results)
    assert counts["forgotten"] == 1
    assert set(counts) <= {"forgotten", "updated", "RevisionConflict", "MemoryForgotten"}
    with pytest.raises(MemoryForgotten):
        ledger.get_memory("alice", memory.memory_id)
    assert ledger.memory_ids("alice") == []


def test_concurrent_identical_proposals_make_one_candidate(ledger: MemoryLedger) -> None:
    results = race(
        [
            lambda: ledger.propose_candidate(
                "alice",
                operation="create",
                scope=Scope.global_(),
                memory_key="language",
                content="Answer in Python",
                category="preference",
            )
            for _ in range(10)
        ]
    )
    assert kinds(results) == {"candidate_created": 1, "duplicate": 9}


def test_concurrent_accepts_of_one_candidate_make_one_memory(ledger: MemoryLedger) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="language",
        content="Answer in Python",
        category="preference",
    ).candidate
    results = race(
        [lambda: ledger.accept_candidate("alice", candidate.candidate_id) for _ in range(10)]
    )
    assert kinds(results) == {"accepted": 1, "CandidateNotPending": 9}
    assert len(ledger.memory_ids("alice")) == 1


def test_first_settings_changes_racing_both_apply(ledger: MemoryLedger) -> None:
    race(
        [
            lambda: ledger.change_settings("alice", saved_memory_enabled=False),
            lambda: ledger.change_settings("alice", auto_extract_enabled=False),
        ]
    )
    settings = ledger.get_settings("alice")
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (False, False)
