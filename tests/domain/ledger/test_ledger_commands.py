"""Commands end to end on PostgreSQL: the rules of sections 8, 9 and 17, one behaviour each."""

from __future__ import annotations

from datetime import timedelta

import pytest

from domain.errors import (
    CandidateNotPending,
    InvalidInput,
    KeyExists,
    MemoryForgotten,
    NotFound,
    RevisionConflict,
    SensitiveContent,
)
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope

LEARNING = Scope.workspace("learning")


def remember(ledger: MemoryLedger, content: str = "one hour a day", **kw: object) -> object:
    fields = dict(scope=LEARNING, memory_key="study_time", content=content, category="constraint")
    fields.update(kw)
    return ledger.create_memory("alice", **fields).memory  # type: ignore[arg-type]


def test_the_same_content_after_normalisation_is_an_idempotent_success(
    ledger: MemoryLedger,
) -> None:
    first = remember(ledger, "One hour a day.")
    again = ledger.create_memory(
        "alice",
        scope=LEARNING,
        memory_key="Study-Time",
        content="  one   HOUR a day ",
        category="constraint",
    )
    assert again.status == "unchanged" and again.memory.memory_id == first.memory_id
    assert again.memory.revision == 1 and again.position is None


def test_a_different_value_for_a_live_key_is_refused(ledger: MemoryLedger) -> None:
    first = remember(ledger)
    with pytest.raises(KeyExists) as error:
        remember(ledger, "two hours a day")
    assert error.value.memory_id == first.memory_id


def test_update_with_a_stale_revision_conflicts_and_reports_the_current_one(
    ledger: MemoryLedger,
) -> None:
    memory = remember(ledger)
    ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="two hours")
    with pytest.raises(RevisionConflict) as error:
        ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="three")
    assert error.value.current_revision == 2


def test_category_change_is_a_new_revision_but_schedule_change_is_not(
    ledger: MemoryLedger, clock: object
) -> None:
    memory = remember(ledger)
    updated = ledger.update_memory(
        "alice", memory.memory_id, expected_revision=1, category="preference"
    ).memory
    assert updated.revision == 2 and updated.category == "preference"
    review = clock.now + timedelta(days=90)  # type: ignore[attr-defined]
    rescheduled = ledger.update_memory(
        "alice", memory.memory_id, expected_revision=2, review_after=review
    ).memory
    assert rescheduled.revision == 2 and rescheduled.review_after == review


def test_expiry_in_the_past_is_refused(ledger: MemoryLedger, clock: object) -> None:
    with pytest.raises(InvalidInput) as error:
        remember(ledger, expires_at=clock.now - timedelta(seconds=1))  # type: ignore[attr-defined]
    assert error.value.field == "expires_at"


def test_suppress_and_restore_keep_the_revision(ledger: MemoryLedger) -> None:
    memory = remember(ledger)
    assert ledger.suppress_memory("alice", memory.memory_id).memory.status == "suppressed"
    assert ledger.suppress_memory("alice", memory.memory_id).status == "unchanged"
    restored = ledger.restore_memory("alice", memory.memory_id).memory
    assert (restored.status, restored.revision) == ("active", 1)


def test_restoring_a_version_copies_it_into_a_new_revision(ledger: MemoryLedger) -> None:
    memory = remember(ledger)
    ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="two hours")
    restored = ledger.restore_version(
        "alice", memory.memory_id, revision=1, expected_revision=2
    ).memory
    assert (restored.revision, restored.content) == (3, "one hour a day")
    assert [(v.revision, v.change_type) for v in restored.versions] == [
        (1, "create"),
        (2, "update"),
        (3, "restore"),
    ]
    with pytest.raises(RevisionConflict):
        ledger.restore_version("alice", memory.memory_id, revision=1, expected_revision=2)


def test_legacy_put_replaces_the_global_value_with_history(ledger: MemoryLedger) -> None:
    created = ledger.put_global_memory(
        "alice", memory_key="lang", content="Python", category="preference"
    )
    replaced = ledger.put_global_memory(
        "alice", memory_key="lang", content="Rust", category="preference"
    )
    assert replaced.memory.memory_id == created.memory.memory_id
    assert replaced.memory.versions[-1].change_type == "replace"
    assert replaced.memory.scope_type == "global"


def test_another_users_memory_is_not_found(ledger: MemoryLedger) -> None:
    memory = remember(ledger)
    with pytest.raises(NotFound):
        ledger.get_memory("mallory", memory.memory_id)
    with pytest.raises(NotFound):
        ledger.forget_memory("mallory", memory.memory_id)
    with pytest.raises(NotFound):
        ledger.update_memory("mallory", memory.memory_id, expected_revision=1, content="x")


def test_every_write_to_a_forgotten_memory_fails(ledger: MemoryLedger) -> None:
    memory = remember(ledger)
    ledger.forget_memory("alice", memory.memory_id)
    for command in (
        lambda: ledger.forget_memory("alice", memory.memory_id),
        lambda: ledger.suppress_memory("alice", memory.memory_id),
        lambda: ledger.restore_memory("alice", memory.memory_id),
        lambda: ledger.update_memory(
            "alice", memory.memory_id, expected_revision=1, content="again"
        ),
        lambda: ledger.restore_version("alice", memory.memory_id, revision=1, expected_revision=1),
    ):
        with pytest.raises(MemoryForgotten):
            command()


def test_secrets_are_refused_before_anything_is_written(ledger: MemoryLedger) -> None:
    with pytest.raises(SensitiveContent) as error:
        remember(ledger, "my password is hunter2!")
    assert error.value.kind == "password"
    assert ledger.recorded() == 0


def test_accepting_a_create_candidate_with_edits(ledger: MemoryLedger) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="style",
        content="likes examples",
        category="preference",
        source_conversation_id="conv-1",
    ).candidate
    accepted = ledger.accept_candidate(
        "alice",
        candidate.candidate_id,
        content="I prefer examples before definitions",
        scope_type="workspace",
        workspace_type="learning",
    )
    memory = accepted.memory
    assert (memory.scope_type, memory.workspace_type) == ("workspace", "learning")
    assert memory.content == "I prefer examples before definitions"
    assert memory.source_type == "confirmed"
    assert memory.versions[0].changed_via == "candidate"
    assert memory.versions[0].source_candidate_id == candidate.candidate_id
    assert accepted.candidate.status == "accepted"
    assert accepted.candidate.resulting_memory_id == memory.memory_id


def test_accepting_a_replace_candidate_after_the_memory_changed_conflicts(
    ledger: MemoryLedger,
) -> None:
    memory = remember(ledger)
    candidate = ledger.propose_candidate(
        "alice",
        operation="replace",
        scope=LEARNING,
        memory_key="study_time",
        content="two hours a day",
        category="constraint",
        target_memory_id=memory.memory_id,
    ).candidate
    ledger.update_memory("alice", memory.memory_id, expected_revision=1, content="90 minutes")
    with pytest.raises(RevisionConflict) as error:
        ledger.accept_candidate("alice", candidate.candidate_id)
    assert error.value.current_revision == 2
    assert ledger.get_candidate("alice", candidate.candidate_id).status == "pending"


def test_an_accepted_replace_candidate_is_a_replace_version(ledger: MemoryLedger) -> None:
    memory = remember(ledger)
    candidate = ledger.propose_candidate(
        "alice",
        operation="replace",
        scope=LEARNING,
        memory_key="study_time",
        content="two hours a day",
        category="constraint",
        target_memory_id=memory.memory_id,
    ).candidate
    version = ledger.accept_candidate("alice", candidate.candidate_id).memory.versions[-1]
    assert (version.change_type, version.changed_via) == ("replace", "candidate")
    assert version.source_candidate_id == candidate.candidate_id


def test_a_candidate_expires_after_thirty_days(ledger: MemoryLedger, clock: object) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content="pass the exam",
        category="goal",
    ).candidate
    clock.advance(days=30)  # type: ignore[attr-defined]
    with pytest.raises(CandidateNotPending) as error:
        ledger.accept_candidate("alice", candidate.candidate_id)
    assert error.value.status == "expired"
    assert ledger.get_candidate("alice", candidate.candidate_id).status == "expired"


def test_a_rejected_proposal_may_come_back_after_thirty_days(
    ledger: MemoryLedger, clock: object
) -> None:
    proposal = dict(
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content="pass the exam",
        category="goal",
    )
    candidate = ledger.propose_candidate("alice", **proposal).candidate  # type: ignore[arg-type]
    ledger.reject_candidate("alice", candidate.candidate_id)
    clock.advance(days=29)  # type: ignore[attr-defined]
    assert ledger.propose_candidate("alice", **proposal).status == "previously_rejected"  # type: ignore[arg-type]
    clock.advance(days=2)  # type: ignore[attr-defined]
    assert ledger.propose_candidate("alice", **proposal).status == "candidate_created"  # type: ignore[arg-type]


def test_deciding_twice_is_refused(ledger: MemoryLedger) -> None:
    candidate = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content="pass",
        category="goal",
    ).candidate
    ledger.reject_candidate("alice", candidate.candidate_id)
    with pytest.raises(CandidateNotPending):
        ledger.accept_candidate("alice", candidate.candidate_id)


def test_settings_default_to_enabled_and_change(ledger: MemoryLedger) -> None:
    assert ledger.get_settings("alice").saved_memory_enabled is True
    settings, _ = ledger.change_settings("alice", auto_extract_enabled=False)
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (True, False)
