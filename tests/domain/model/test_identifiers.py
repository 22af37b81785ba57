"""Identifiers stored in clear (user ids, conversation ids): one pattern, checked by the model.

A value PostgreSQL cannot store (NUL) or a projection cannot apply stalls the whole ledger, so
the aggregates refuse it when they record a new event, whatever the caller checked before.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from domain.errors import InvalidInput
from domain.model.candidate import MemoryCandidate
from domain.model.memory import Memory
from domain.model.memory_settings import MemorySettings
from domain.model.values import ID_PATTERN, MAX_ID_CHARS, check_id
from tests.domain.model.aggregate_steps import replay
from tests.domain.model.test_candidate_aggregate import proposed_fields
from tests.domain.model.test_memory_aggregate import created_fields

MEMORY_ID = UUID("00000000-0000-4000-8000-000000000001")
CANDIDATE_ID = UUID("00000000-0000-4000-8000-0000000000c1")

GOOD = [
    "alice",
    "user-1",
    "auth0|5f7c8ec7c33c6c004bbafe82",
    "alice@example.com",
    "google-oauth2|1234",
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "conv:2026-12-01/7",
    "a" * MAX_ID_CHARS,
]
BAD = [
    "",
    "c\x00d",
    "a\x01b",
    "tab\there",
    "new\nline",
    "a\x7fb",
    "a\x85b",
    "a\u202eb",  # right-to-left override
    "a b",
    "ünïcode",
    "-leading-dash",
    ".hidden",
    "quote'd",
    "a" * (MAX_ID_CHARS + 1),
    "ok\n",  # `$` alone would accept a trailing newline
]


@pytest.mark.parametrize("value", GOOD)
def test_ordinary_identifiers_pass(value: str) -> None:
    assert check_id("user_id", value) == value


@pytest.mark.parametrize("value", BAD)
def test_control_characters_spaces_and_odd_characters_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_id("user_id", value)

    assert raised.value.field == "user_id"


@pytest.mark.parametrize("value", [None, 7, b"alice"])
def test_a_non_string_identifier_is_refused(value: object) -> None:
    with pytest.raises(InvalidInput):
        check_id("user_id", value)  # type: ignore[arg-type]


def test_the_pattern_is_anchored_and_bounded() -> None:
    assert ID_PATTERN.startswith("^") and ID_PATTERN.endswith("$")
    assert f"{{0,{MAX_ID_CHARS - 1}}}" in ID_PATTERN


# -- the aggregates refuse them when recording ----------------------------------------------


def memory_fields(user_id: str) -> dict[str, Any]:
    return created_fields(user_id=user_id)


def candidate_fields(user_id: str, conversation: str | None) -> dict[str, Any]:
    return proposed_fields(user_id=user_id, source_conversation_id=conversation)


def test_a_memory_of_a_user_id_with_nul_is_refused() -> None:
    with pytest.raises(InvalidInput) as raised:
        Memory.new(MEMORY_ID, **memory_fields("a\x00b"))

    assert raised.value.field == "user_id"


@pytest.mark.parametrize(
    ("user_id", "conversation", "field"),
    [
        ("a\x00b", None, "user_id"),
        ("alice", "c\x00d", "source_conversation_id"),
        ("alice", "c\x1bd", "source_conversation_id"),
        ("alice", "", "source_conversation_id"),
    ],
)
def test_a_candidate_with_an_unstorable_identifier_is_refused(
    user_id: str, conversation: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        MemoryCandidate.new(CANDIDATE_ID, **candidate_fields(user_id, conversation))

    assert raised.value.field == field


def test_a_candidate_without_a_conversation_id_is_fine() -> None:
    candidate = MemoryCandidate.new(CANDIDATE_ID, **candidate_fields("alice", None))

    assert candidate.source_conversation_id is None


def test_settings_of_an_invalid_user_id_cannot_change() -> None:
    settings = MemorySettings(user_id="a\x00b")

    with pytest.raises(InvalidInput):
        settings.change(saved_memory_enabled=False, auto_extract_enabled=None)


def test_settings_of_an_odd_legacy_user_id_can_still_be_erased() -> None:
    settings = MemorySettings(user_id="legacy user")

    settings.erase()

    assert settings.saved_memory_enabled is True


def test_events_recorded_before_the_rule_still_replay() -> None:
    """Replaying never re-checks: an old event with an odd user id still loads."""
    old = MemoryCandidate.new(CANDIDATE_ID, **candidate_fields("alice", "conversation-1"))
    event = old.collect_events()[0]
    object.__setattr__(event, "source_conversation_id", "odd id")

    assert replay([event]).source_conversation_id == "odd id"
