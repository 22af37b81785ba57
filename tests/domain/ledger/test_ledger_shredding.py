"""Forgetting crypto-shreds: the content is gone from the whole database and every replay."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable

import pytest

from domain.errors import MemoryForgotten
from domain.ledger.ledger import MemoryLedger
from domain.model.events import REDACTED, is_redacted
from domain.model.values import Scope
from tests.dumps import pg_dump


def traces(marker: str) -> list[bytes]:
    """Every encoding of the marker a dump could hold: text, bytea hex, base64."""
    raw = marker.encode()
    return [raw, raw.hex().encode(), base64.b64encode(raw)[:16]]


def all_events(ledger: MemoryLedger) -> list[object]:
    recorder = ledger.store.recorder()
    return [
        ledger.mapper.to_domain_event(n)
        for p in range(recorder.partitions)
        for n in recorder.read_partition(p, 0, 1_000_000)
    ]


def test_forgotten_marker_is_nowhere_in_a_database_dump(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    marker = f"MARKER{uuid.uuid4().hex}"
    memory = ledger.create_memory(
        "alice",
        scope=Scope.global_(),
        memory_key="secret_hobby",
        content=f"I love {marker}",
        category="background",
    ).memory
    ledger.update_memory(
        "alice", memory.memory_id, expected_revision=1, content=f"I really love {marker}"
    )
    ledger.propose_candidate(
        "alice",
        operation="replace",
        scope=Scope.global_(),
        memory_key="secret_hobby",
        content=f"I used to love {marker}",
        category="background",
        target_memory_id=memory.memory_id,
    )
    before = pg_dump(database_url, pg_schema)
    assert not any(trace in before for trace in traces(marker)), "content must be sealed at rest"
    assert ledger.get_memory("alice", memory.memory_id).content.endswith(marker)

    ledger.forget_memory("alice", memory.memory_id)

    after = pg_dump(database_url, pg_schema)
    assert f"{pg_schema}.memledger_events".encode() in after  # the dump does hold our ledger
    assert not any(trace in after for trace in traces(marker))
    events = all_events(ledger)  # a rebuild reads every event: nothing raises
    personal = [e for e in events if getattr(type(e), "PERSONAL", ())]
    assert personal and all(is_redacted(e) for e in personal)
    assert all(marker not in repr(vars(e)) for e in events)


def test_replaying_a_forgotten_memory_gives_placeholders_and_a_tombstone(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="hello", category="fact"
    ).memory
    ledger.forget_memory("alice", memory.memory_id)
    fresh = make_ledger()  # another process, with an empty key cache
    created, tombstone = list(fresh.events.get(memory.memory_id))
    assert created.content == REDACTED and created.memory_key == REDACTED
    assert created.user_id == "alice" and created.scope_type == "global"  # audit stays clear
    assert (tombstone.user_id, tombstone.final_revision) == ("alice", 1)
    with pytest.raises(MemoryForgotten):
        fresh.update_memory("alice", memory.memory_id, expected_revision=1, content="again")


def test_candidates_about_a_forgotten_memory_are_shredded_with_it(ledger: MemoryLedger) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="tea", category="preference"
    ).memory
    candidate = ledger.propose_candidate(
        "alice",
        operation="update",
        scope=Scope.global_(),
        memory_key="k",
        content="coffee",
        category="preference",
        target_memory_id=memory.memory_id,
    ).candidate
    ledger.forget_memory("alice", memory.memory_id)
    assert ledger.get_candidate("alice", candidate.candidate_id).proposed_content == REDACTED


def test_an_accepted_create_candidate_is_shredded_with_its_memory(ledger: MemoryLedger) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="k",
        content="tea",
        category="preference",
    ).candidate
    memory = ledger.accept_candidate("alice", candidate.candidate_id).memory
    ledger.forget_memory("alice", memory.memory_id)
    assert ledger.get_candidate("alice", candidate.candidate_id).proposed_content == REDACTED


def test_forgetting_frees_the_key_for_a_new_memory(ledger: MemoryLedger) -> None:
    first = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="tea", category="preference"
    ).memory
    ledger.forget_memory("alice", first.memory_id)
    second = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="coffee", category="preference"
    )
    assert second.status == "created" and second.memory.memory_id != first.memory_id


def test_erasing_a_user_shreds_everything_of_theirs_and_nothing_else(
    ledger: MemoryLedger,
) -> None:
    mine = [
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        ).memory
        for i in range(3)
    ]
    pending = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="p",
        content="maybe",
        category="fact",
    ).candidate
    ledger.change_settings("alice", saved_memory_enabled=False)
    theirs = ledger.create_memory(
        "bob", scope=Scope.global_(), memory_key="k0", content="fact 0", category="fact"
    ).memory

    ledger.erase_user("alice")

    for memory in mine:
        with pytest.raises(MemoryForgotten):
            ledger.get_memory("alice", memory.memory_id)
    erased = ledger.get_candidate("alice", pending.candidate_id)
    assert (erased.status, erased.proposed_content) == ("expired", REDACTED)
    assert ledger.get_settings("alice").saved_memory_enabled is True
    assert ledger.memory_ids("alice") == []
    assert ledger.get_memory("bob", theirs.memory_id).content == "fact 0"


def test_a_rejected_proposal_keeps_only_its_fingerprint_outside_the_log(
    ledger: MemoryLedger,
) -> None:
    proposal = dict(
        operation="create",
        scope=Scope.global_(),
        memory_key="diet",
        content="I am vegan",
        category="fact",
    )
    candidate = ledger.propose_candidate("alice", **proposal).candidate  # type: ignore[arg-type]
    rejected = ledger.reject_candidate("alice", candidate.candidate_id).candidate
    assert rejected is not None and rejected.proposed_content == REDACTED
    events = list(ledger.events.get(candidate.candidate_id))
    assert is_redacted(events[0])
    assert not hasattr(events[-1], "fingerprint")  # kept in the fingerprint table only
    again = ledger.propose_candidate("alice", **proposal)  # type: ignore[arg-type]
    assert again.status == "previously_rejected"
