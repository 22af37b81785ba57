"""The MemoryCandidate aggregate: given events, when a decision, then the events it records."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given as for_all
from hypothesis import settings
from hypothesis import strategies as st

from domain.errors import CandidateNotPending, InvalidInput
from domain.model.candidate import CANDIDATE_TTL, MemoryCandidate
from domain.model.events import REDACTED
from tests.domain.model.aggregate_steps import given as steps_given
from tests.domain.model.aggregate_steps import replay, state, then

CANDIDATE_ID = UUID("00000000-0000-4000-8000-0000000000c1")
MEMORY_ID = UUID("00000000-0000-4000-8000-000000000001")
RESULTING_ID = UUID("00000000-0000-4000-8000-000000000002")
NOW = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
EXPIRES_AT = NOW + CANDIDATE_TTL

Step = Callable[[MemoryCandidate], Any]
DECISION_EVENTS = (MemoryCandidate.Accepted, MemoryCandidate.Rejected, MemoryCandidate.Expired)


# -- given / when / then helpers ------------------------------------------------------------


def proposed_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "user_id": "user-1",
        "operation": "create",
        "target_memory_id": None,
        "expected_revision": None,
        "proposed_scope_type": "workspace",
        "proposed_workspace_type": "learning",
        "proposed_key": "favourite_drink",
        "proposed_content": "Likes tea.",
        "proposed_category": "preference",
        "source_conversation_id": "conversation-1",
        "expires_at": EXPIRES_AT,
    }
    fields.update(overrides)
    return fields


def given(*steps: Step, **fields: Any) -> MemoryCandidate:
    """A candidate rebuilt from its Proposed event followed by `steps` (none pending)."""
    return steps_given(MemoryCandidate.new(CANDIDATE_ID, **proposed_fields(**fields)), *steps)


def accepted() -> Step:
    return lambda candidate: candidate.accept(resulting_memory_id=RESULTING_ID)


def rejected() -> Step:
    return lambda candidate: candidate.reject()


def expired() -> Step:
    return lambda candidate: candidate.expire()


DECISIONS: dict[str, Step] = {"accepted": accepted(), "rejected": rejected(), "expired": expired()}


# -- check_operation -------------------------------------------------------------------------


def test_a_create_proposal_has_no_target_memory() -> None:
    MemoryCandidate.check_operation("create", None)


def test_a_create_proposal_with_a_target_memory_is_invalid() -> None:
    with pytest.raises(InvalidInput) as raised:
        MemoryCandidate.check_operation("create", MEMORY_ID)

    assert raised.value.field == "target_memory_id"


@pytest.mark.parametrize("operation", ["update", "replace"])
def test_an_update_or_replace_proposal_names_its_target_memory(operation: str) -> None:
    MemoryCandidate.check_operation(operation, MEMORY_ID)


@pytest.mark.parametrize("operation", ["update", "replace"])
def test_an_update_or_replace_proposal_without_a_target_is_invalid(operation: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        MemoryCandidate.check_operation(operation, None)

    assert raised.value.field == "target_memory_id"


@pytest.mark.parametrize("operation", ["delete", "", "CREATE", "merge"])
def test_an_unknown_operation_is_invalid(operation: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        MemoryCandidate.check_operation(operation, None)

    assert raised.value.field == "operation"


# -- proposal --------------------------------------------------------------------------------


def test_a_new_candidate_records_one_proposed_event() -> None:
    candidate = MemoryCandidate.new(CANDIDATE_ID, **proposed_fields())

    events = then(candidate)

    assert [type(e) for e in events] == [MemoryCandidate.Proposed]
    assert events[0].proposed_key == "favourite_drink"
    assert events[0].proposed_content == "Likes tea."
    assert events[0].expires_at == EXPIRES_AT


def test_a_new_candidate_is_pending_and_undecided() -> None:
    candidate = MemoryCandidate.new(
        CANDIDATE_ID,
        **proposed_fields(operation="update", target_memory_id=MEMORY_ID, expected_revision=3),
    )

    assert candidate.id == CANDIDATE_ID
    assert candidate.status == "pending"
    assert candidate.decided_at is None
    assert candidate.resulting_memory_id is None
    assert (candidate.target_memory_id, candidate.expected_revision) == (MEMORY_ID, 3)


def test_the_default_lifetime_of_a_candidate_is_30_days() -> None:
    assert timedelta(days=30) == CANDIDATE_TTL


# -- accept / reject / expire ----------------------------------------------------------------


def test_accepting_a_pending_candidate_records_accepted_with_the_edits() -> None:
    candidate = given()

    candidate.accept(
        resulting_memory_id=RESULTING_ID,
        edited_content="Likes green tea.",
        edited_category="background",
        edited_scope_type="global",
        edited_workspace_type=None,
    )

    events = then(candidate)
    assert [type(e) for e in events] == [MemoryCandidate.Accepted]
    assert events[0].resulting_memory_id == RESULTING_ID
    assert events[0].edited_content == "Likes green tea."
    assert events[0].edited_category == "background"
    assert (events[0].edited_scope_type, events[0].edited_workspace_type) == ("global", None)


def test_an_accepted_candidate_keeps_its_proposal_and_links_the_memory() -> None:
    candidate = given()

    candidate.accept(resulting_memory_id=RESULTING_ID)

    assert candidate.status == "accepted"
    assert candidate.decided_at == candidate.modified_on
    assert candidate.resulting_memory_id == RESULTING_ID
    assert candidate.proposed_key == "favourite_drink"
    assert candidate.proposed_content == "Likes tea."


def test_rejecting_a_pending_candidate_records_rejected_without_any_fingerprint() -> None:
    candidate = given()

    candidate.reject()

    events = then(candidate)
    assert [type(e) for e in events] == [MemoryCandidate.Rejected]
    assert not hasattr(events[0], "fingerprint")  # it lives outside the log, for 30 days
    assert candidate.status == "rejected"
    assert candidate.decided_at == events[0].timestamp


def test_a_version_1_rejection_read_back_drops_its_fingerprint() -> None:
    state = {"fingerprint": "fingerprint-1", "user_id": "alice"}
    MemoryCandidate.Rejected.upcast_v1_v2(state)
    assert state == {"user_id": "alice"}


def test_rejecting_a_candidate_redacts_its_proposal() -> None:
    candidate = given()

    candidate.reject()

    assert candidate.proposed_key == REDACTED
    assert candidate.proposed_content == REDACTED


def test_expiring_a_pending_candidate_records_expired() -> None:
    candidate = given()

    candidate.expire()

    events = then(candidate)
    assert [type(e) for e in events] == [MemoryCandidate.Expired]
    assert candidate.status == "expired"
    assert candidate.decided_at == events[0].timestamp
    assert candidate.resulting_memory_id is None


def test_expiring_a_candidate_redacts_its_proposal() -> None:
    candidate = given()

    candidate.expire()

    assert candidate.proposed_key == REDACTED
    assert candidate.proposed_content == REDACTED


@pytest.mark.parametrize("decided", DECISIONS, ids=DECISIONS)
@pytest.mark.parametrize("decision", DECISIONS, ids=[f"then_{d}" for d in DECISIONS])
def test_a_decided_candidate_cannot_be_decided_again(decided: str, decision: str) -> None:
    candidate = given(DECISIONS[decided])

    with pytest.raises(CandidateNotPending) as raised:
        DECISIONS[decision](candidate)

    assert raised.value.status == decided
    assert then(candidate) == []
    assert candidate.status == decided


def test_replaying_a_rejection_rebuilds_the_redacted_candidate() -> None:
    candidate = MemoryCandidate.new(CANDIDATE_ID, **proposed_fields())
    candidate.reject()

    rebuilt = replay(candidate.collect_events())

    assert state(rebuilt) == state(candidate)
    assert rebuilt.proposed_content == REDACTED


# -- is_due ----------------------------------------------------------------------------------


def test_a_pending_candidate_is_not_due_before_its_expiry() -> None:
    assert given().is_due(EXPIRES_AT - timedelta(microseconds=1)) is False


def test_a_pending_candidate_is_due_at_its_expiry() -> None:
    assert given().is_due(EXPIRES_AT) is True


def test_a_pending_candidate_is_due_after_its_expiry() -> None:
    assert given().is_due(EXPIRES_AT + timedelta(days=1)) is True


@pytest.mark.parametrize("decided", DECISIONS, ids=DECISIONS)
def test_a_decided_candidate_is_never_due(decided: str) -> None:
    candidate = given(DECISIONS[decided])

    assert candidate.is_due(EXPIRES_AT + timedelta(days=1)) is False


# -- property: one terminal decision --------------------------------------------------------


@settings(max_examples=100, deadline=None, database=None)
@for_all(st.lists(st.sampled_from(sorted(DECISIONS)), min_size=1, max_size=8))
def test_any_sequence_of_decisions_leaves_exactly_one_terminal_decision(
    decisions: list[str],
) -> None:
    candidate = MemoryCandidate.new(CANDIDATE_ID, **proposed_fields())
    first, *later = decisions

    DECISIONS[first](candidate)
    for decision in later:
        with pytest.raises(CandidateNotPending) as raised:
            DECISIONS[decision](candidate)
        assert raised.value.status == first

    events = candidate.collect_events()
    assert [type(e) for e in events if isinstance(e, DECISION_EVENTS)] == [
        {
            "accepted": MemoryCandidate.Accepted,
            "rejected": MemoryCandidate.Rejected,
            "expired": MemoryCandidate.Expired,
        }[first]
    ]
    assert candidate.status == first
    assert candidate.is_due(EXPIRES_AT) is False
    assert state(replay(events)) == state(candidate)
