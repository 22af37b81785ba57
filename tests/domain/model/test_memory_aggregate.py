"""The Memory aggregate: given events, when a command, then the events it records."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from domain.errors import InvalidInput, MemoryForgotten, RevisionConflict
from domain.model.memory import Memory, Version
from domain.model.values import CATEGORIES, Scope, check_content, normalise_content
from tests.domain.model.aggregate_steps import given as steps_given
from tests.domain.model.aggregate_steps import replay, state, then

MEMORY_ID = UUID("00000000-0000-4000-8000-000000000001")
CANDIDATE_ID = UUID("00000000-0000-4000-8000-0000000000c1")
NOW = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)
REVIEW_AFTER = NOW + timedelta(days=90)
EXPIRES_AT = NOW + timedelta(days=365)

Step = Callable[[Memory], Any]


# -- given / when / then helpers ------------------------------------------------------------


def created_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "user_id": "user-1",
        "scope_type": "global",
        "workspace_type": None,
        "memory_key": "favourite_drink",
        "content": "Likes tea.",
        "content_hash": "hash-1",
        "category": "preference",
        "source_type": "explicit",
        "changed_via": "user_api",
        "source_candidate_id": None,
        "review_after": None,
        "expires_at": None,
    }
    fields.update(overrides)
    return fields


def given(*steps: Step, **fields: Any) -> Memory:
    """A memory rebuilt from the events of its creation followed by `steps` (none pending)."""
    return steps_given(Memory.new(MEMORY_ID, **created_fields(**fields)), *steps)


def updated(content: str, category: str = "preference") -> Step:
    def step(memory: Memory) -> None:
        memory.change_content(
            expected_revision=memory.revision,
            content=content,
            content_hash="h",
            category=category,
            changed_via="user_api",
        )

    return step


def suppressed() -> Step:
    return lambda memory: memory.suppress()


def forgotten() -> Step:
    return lambda memory: memory.forget(NOW)


def change(memory: Memory, content: str, category: str = "preference", **kwargs: Any) -> bool:
    kwargs.setdefault("expected_revision", memory.revision)
    kwargs.setdefault("content_hash", "hash-new")
    kwargs.setdefault("changed_via", "user_api")
    return memory.change_content(content=content, category=category, **kwargs)


# -- creation -------------------------------------------------------------------------------


def test_a_new_memory_records_one_created_event() -> None:
    memory = Memory.new(MEMORY_ID, **created_fields())

    events = then(memory)

    assert [type(e) for e in events] == [Memory.Created]
    assert events[0].memory_key == "favourite_drink"
    assert events[0].content == "Likes tea."
    assert events[0].content_hash == "hash-1"


def test_a_new_memory_is_active_at_revision_1_with_one_create_version() -> None:
    memory = Memory.new(MEMORY_ID, **created_fields(source_candidate_id=CANDIDATE_ID))

    assert memory.id == MEMORY_ID
    assert memory.status == "active"
    assert memory.revision == 1
    assert memory.versions == [
        Version(
            1, "Likes tea.", "preference", "create", "user_api", CANDIDATE_ID, memory.created_on
        )
    ]


def test_a_new_memory_keeps_its_scope_and_schedule() -> None:
    memory = Memory.new(
        MEMORY_ID,
        **created_fields(
            scope_type="workspace",
            workspace_type="research",
            review_after=REVIEW_AFTER,
            expires_at=EXPIRES_AT,
        ),
    )

    assert memory.scope == Scope.workspace("research")
    assert memory.review_after == REVIEW_AFTER
    assert memory.expires_at == EXPIRES_AT
    assert memory.last_confirmed_at is None


def test_a_memory_cannot_be_created_in_an_invalid_scope() -> None:
    with pytest.raises(InvalidInput) as raised:
        Memory.new(MEMORY_ID, **created_fields(scope_type="global", workspace_type="learning"))

    assert raised.value.field == "workspace_type"


# -- change_content -------------------------------------------------------------------------


def test_updating_the_content_records_updated_with_the_next_revision() -> None:
    memory = given()

    assert change(memory, "Prefers coffee.", source_candidate_id=CANDIDATE_ID) is True

    events = then(memory)
    assert [type(e) for e in events] == [Memory.Updated]
    assert events[0].revision == 2
    assert events[0].content == "Prefers coffee."
    assert events[0].content_hash == "hash-new"
    assert events[0].source_candidate_id == CANDIDATE_ID


def test_updating_the_content_appends_an_update_version() -> None:
    memory = given()

    change(memory, "Prefers coffee.", changed_via="agent_tool")

    assert memory.revision == 2
    assert memory.content == "Prefers coffee."
    assert [v.revision for v in memory.versions] == [1, 2]
    assert memory.versions[-1].change_type == "update"
    assert memory.versions[-1].changed_via == "agent_tool"
    assert memory.versions[0].content == "Likes tea."


def test_replacing_the_content_records_replaced_and_a_replace_version() -> None:
    memory = given(updated("Prefers coffee."))

    assert change(memory, "Drinks only water.", replace=True) is True

    assert [type(e) for e in then(memory)] == [Memory.Replaced]
    assert memory.revision == 3
    assert memory.versions[-1].change_type == "replace"


@pytest.mark.parametrize(
    "same_content",
    [
        "Likes tea.",
        "LIKES TEA.",  # case
        "ｌｉｋｅｓ　ｔｅａ",  # noqa: RUF001 (full width letters and space on purpose)
        "Likes tea",  # trailing punctuation
        "Likes tea!",
        "Likes tea?",
        "  Likes \n\t tea.  ",  # whitespace
    ],
)
def test_the_same_content_after_normalisation_records_nothing(same_content: str) -> None:
    memory = given()

    assert change(memory, same_content) is False

    assert then(memory) == []
    assert memory.revision == 1
    assert memory.content == "Likes tea."


def test_replacing_with_the_same_content_records_nothing() -> None:
    memory = given()

    assert change(memory, "likes tea", replace=True) is False

    assert then(memory) == []


def test_changing_only_the_category_makes_a_new_revision() -> None:
    memory = given()

    assert change(memory, "Likes tea.", category="background") is True

    events = then(memory)
    assert [type(e) for e in events] == [Memory.Updated]
    assert events[0].category == "background"
    assert memory.revision == 2
    assert memory.category == "background"


def test_a_stale_expected_revision_is_a_conflict_with_the_current_revision() -> None:
    memory = given(updated("Prefers coffee."))

    with pytest.raises(RevisionConflict) as raised:
        change(memory, "Drinks only water.", expected_revision=1)

    assert raised.value.current_revision == 2
    assert then(memory) == []
    assert memory.revision == 2


def test_an_expected_revision_ahead_of_the_memory_is_a_conflict() -> None:
    memory = given()

    with pytest.raises(RevisionConflict) as raised:
        change(memory, "Prefers coffee.", expected_revision=2)

    assert raised.value.current_revision == 1


def test_a_stale_expected_revision_is_a_conflict_even_for_the_same_content() -> None:
    memory = given(updated("Prefers coffee."))

    with pytest.raises(RevisionConflict):
        change(memory, "Prefers coffee.", expected_revision=1)


def test_without_an_expected_revision_the_change_is_not_checked() -> None:
    memory = given(updated("Prefers coffee."))

    assert change(memory, "Drinks only water.", expected_revision=None) is True

    assert memory.revision == 3


def test_a_suppressed_memory_can_still_be_updated() -> None:
    memory = given(suppressed())

    assert change(memory, "Prefers coffee.") is True

    assert memory.status == "suppressed"
    assert memory.revision == 2


# -- confirm ---------------------------------------------------------------------------------


def test_confirming_records_confirmed_and_keeps_the_revision() -> None:
    memory = given()

    memory.confirm()

    events = then(memory)
    assert [type(e) for e in events] == [Memory.Confirmed]
    assert memory.last_confirmed_at == events[0].timestamp
    assert memory.revision == 1


# -- suppress / restore ----------------------------------------------------------------------


def test_suppressing_an_active_memory_records_suppressed_and_keeps_the_revision() -> None:
    memory = given(updated("Prefers coffee."))

    assert memory.suppress() is True

    assert [type(e) for e in then(memory)] == [Memory.Suppressed]
    assert memory.status == "suppressed"
    assert memory.revision == 2
    assert len(memory.versions) == 2


def test_suppressing_a_suppressed_memory_records_nothing() -> None:
    memory = given(suppressed())

    assert memory.suppress() is False

    assert then(memory) == []
    assert memory.status == "suppressed"


def test_restoring_a_suppressed_memory_records_restored_and_keeps_the_revision() -> None:
    memory = given(updated("Prefers coffee."), suppressed())

    assert memory.restore() is True

    assert [type(e) for e in then(memory)] == [Memory.Restored]
    assert memory.status == "active"
    assert memory.revision == 2


def test_restoring_an_active_memory_records_nothing() -> None:
    memory = given()

    assert memory.restore() is False

    assert then(memory) == []
    assert memory.status == "active"


# -- restore_version -------------------------------------------------------------------------


def test_restoring_a_version_copies_its_content_into_a_new_revision() -> None:
    memory = given(updated("Prefers coffee.", "background"), updated("Drinks only water."))

    memory.restore_version(
        revision=1, expected_revision=3, content_hash="hash-1", changed_via="user_api"
    )

    events = then(memory)
    assert [type(e) for e in events] == [Memory.VersionRestored]
    assert events[0].from_revision == 1
    assert events[0].revision == 4
    assert events[0].content == "Likes tea."
    assert events[0].category == "preference"
    assert events[0].source_candidate_id is None


def test_restoring_a_version_never_moves_the_revision_back() -> None:
    memory = given(updated("Prefers coffee.", "background"))

    memory.restore_version(
        revision=1, expected_revision=2, content_hash="hash-1", changed_via="user_api"
    )

    assert memory.revision == 3
    assert memory.content == "Likes tea."
    assert memory.category == "preference"
    assert [(v.revision, v.change_type) for v in memory.versions] == [
        (1, "create"),
        (2, "update"),
        (3, "restore"),
    ]


@pytest.mark.parametrize("unknown", [0, 3, -1])
def test_restoring_an_unknown_revision_is_invalid_input(unknown: int) -> None:
    memory = given(updated("Prefers coffee."))

    with pytest.raises(InvalidInput) as raised:
        memory.restore_version(
            revision=unknown, expected_revision=2, content_hash="h", changed_via="user_api"
        )

    assert raised.value.field == "revision"
    assert then(memory) == []
    assert memory.revision == 2


def test_restoring_a_version_with_a_stale_expected_revision_is_a_conflict() -> None:
    memory = given(updated("Prefers coffee."))

    with pytest.raises(RevisionConflict) as raised:
        memory.restore_version(
            revision=1, expected_revision=1, content_hash="h", changed_via="user_api"
        )

    assert raised.value.current_revision == 2
    assert then(memory) == []


# -- reschedule ------------------------------------------------------------------------------


def test_rescheduling_records_the_new_review_and_expiry_dates() -> None:
    memory = given()

    assert memory.reschedule(review_after=REVIEW_AFTER, expires_at=EXPIRES_AT) is True

    events = then(memory)
    assert [type(e) for e in events] == [Memory.ScheduleChanged]
    assert (events[0].review_after, events[0].expires_at) == (REVIEW_AFTER, EXPIRES_AT)
    assert (memory.review_after, memory.expires_at) == (REVIEW_AFTER, EXPIRES_AT)
    assert memory.revision == 1


def test_rescheduling_to_the_same_dates_records_nothing() -> None:
    memory = given(review_after=REVIEW_AFTER, expires_at=EXPIRES_AT)

    assert memory.reschedule(review_after=REVIEW_AFTER, expires_at=EXPIRES_AT) is False

    assert then(memory) == []


def test_rescheduling_can_clear_both_dates() -> None:
    memory = given(review_after=REVIEW_AFTER, expires_at=EXPIRES_AT)

    assert memory.reschedule(review_after=None, expires_at=None) is True

    assert (memory.review_after, memory.expires_at) == (None, None)


# -- forget ----------------------------------------------------------------------------------


def test_forgetting_records_a_tombstone_with_the_final_revision() -> None:
    memory = given(updated("Prefers coffee."), updated("Drinks only water."))

    memory.forget(NOW)

    events = then(memory)
    assert [type(e) for e in events] == [Memory.Forgotten]
    assert events[0].final_revision == 3
    assert events[0].user_id == "user-1"
    assert events[0].deleted_at == NOW


def test_forgetting_clears_the_content_the_key_and_the_versions() -> None:
    memory = given(updated("Prefers coffee."))

    memory.forget(NOW)

    assert memory.status == "forgotten"
    assert memory.is_forgotten
    assert memory.content == ""
    assert memory.memory_key == ""
    assert memory.versions == []
    assert memory.revision == 2


def test_a_suppressed_memory_can_be_forgotten() -> None:
    memory = given(suppressed())

    memory.forget(NOW)

    assert memory.status == "forgotten"


COMMANDS_AFTER_FORGET: dict[str, Step] = {
    "change_content": lambda m: change(m, "Prefers coffee.", expected_revision=1),
    "replace": lambda m: change(m, "Prefers coffee.", expected_revision=1, replace=True),
    "restore_version": lambda m: m.restore_version(
        revision=1, expected_revision=1, content_hash="h", changed_via="user_api"
    ),
    "confirm": lambda m: m.confirm(),
    "suppress": lambda m: m.suppress(),
    "restore": lambda m: m.restore(),
    "reschedule": lambda m: m.reschedule(review_after=REVIEW_AFTER, expires_at=None),
    "forget": lambda m: m.forget(NOW),
}


@pytest.mark.parametrize("command", COMMANDS_AFTER_FORGET.values(), ids=COMMANDS_AFTER_FORGET)
def test_every_command_on_a_forgotten_memory_raises_memory_forgotten(command: Step) -> None:
    memory = given(forgotten())

    with pytest.raises(MemoryForgotten) as raised:
        command(memory)

    assert raised.value.memory_id == MEMORY_ID
    assert then(memory) == []


# -- replay ----------------------------------------------------------------------------------


def test_replaying_the_events_rebuilds_an_equal_memory() -> None:
    memory = Memory.new(MEMORY_ID, **created_fields())
    change(memory, "Prefers coffee.", source_candidate_id=CANDIDATE_ID)
    memory.confirm()
    memory.suppress()
    memory.reschedule(review_after=REVIEW_AFTER, expires_at=EXPIRES_AT)
    memory.restore_version(
        revision=1, expected_revision=2, content_hash="h", changed_via="user_api"
    )
    memory.restore()

    rebuilt = replay(memory.collect_events())

    assert state(rebuilt) == state(memory)


# -- property: random command sequences -----------------------------------------------------


def _is_valid_content(text: str) -> bool:
    try:
        check_content(text)
    except InvalidInput:
        return False
    return True


CONTENTS = st.one_of(
    # Variants that normalise to the same content, so "nothing changes" is exercised too.
    st.sampled_from(["Likes tea.", "likes TEA", "Likes tea!", "Prefers coffee.", "prefers coffee"]),
    st.text(alphabet="abcXYZ .!?\n", min_size=1, max_size=30)
    .filter(_is_valid_content)
    .map(check_content),
)
CATEGORY = st.sampled_from(CATEGORIES)
DATES = st.one_of(st.none(), st.integers(1, 400).map(lambda days: NOW + timedelta(days=days)))


class MemoryLifecycle(RuleBasedStateMachine):
    """Any sequence of commands keeps revisions, versions, status and replay consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.memory = Memory.new(MEMORY_ID, **created_fields())
        self.history: list[Any] = []
        self.forgotten = False
        self.final_revision: int | None = None

    # A command on a live memory.

    @precondition(lambda self: not self.forgotten)
    @rule(content=CONTENTS, category=CATEGORY, replace=st.booleans())
    def update(self, content: str, category: str, replace: bool) -> None:
        before_revision, before_content = self.memory.revision, self.memory.content
        unchanged = (
            normalise_content(content) == normalise_content(before_content)
            and category == self.memory.category
        )

        changed = change(self.memory, content, category, replace=replace)

        assert changed is not unchanged
        assert self.memory.revision == before_revision + (1 if changed else 0)
        if changed:
            assert self.memory.content == content
            assert self.memory.versions[-1].change_type == ("replace" if replace else "update")
        else:
            assert self.memory.content == before_content

    @precondition(lambda self: not self.forgotten)
    @rule(content=CONTENTS, lag=st.integers(1, 3))
    def update_with_stale_revision(self, content: str, lag: int) -> None:
        before = self.memory.revision
        try:
            change(self.memory, content, "other", expected_revision=before - lag)
        except RevisionConflict as conflict:
            assert conflict.current_revision == before
        else:
            raise AssertionError("a stale expected revision was accepted")
        assert self.memory.revision == before

    @precondition(lambda self: not self.forgotten)
    @rule()
    def suppress(self) -> None:
        before = (self.memory.revision, self.memory.status)
        changed = self.memory.suppress()
        assert changed is (before[1] == "active")
        assert (self.memory.revision, self.memory.status) == (before[0], "suppressed")

    @precondition(lambda self: not self.forgotten)
    @rule()
    def restore(self) -> None:
        before = (self.memory.revision, self.memory.status)
        changed = self.memory.restore()
        assert changed is (before[1] == "suppressed")
        assert (self.memory.revision, self.memory.status) == (before[0], "active")

    @precondition(lambda self: not self.forgotten)
    @rule(data=st.data())
    def restore_version(self, data: st.DataObject) -> None:
        before = self.memory.revision
        revision = data.draw(st.integers(0, before + 1), label="revision")
        if 1 <= revision <= before:
            old = self.memory.versions[revision - 1]
            self.memory.restore_version(
                revision=revision,
                expected_revision=before,
                content_hash="h",
                changed_via="user_api",
            )
            assert self.memory.revision == before + 1
            assert (self.memory.content, self.memory.category) == (old.content, old.category)
            assert self.memory.versions[-1].change_type == "restore"
        else:
            try:
                self.memory.restore_version(
                    revision=revision,
                    expected_revision=before,
                    content_hash="h",
                    changed_via="user_api",
                )
            except InvalidInput as error:
                assert error.field == "revision"
            else:
                raise AssertionError(f"unknown revision {revision} was restored")
            assert self.memory.revision == before

    @precondition(lambda self: not self.forgotten)
    @rule(review_after=DATES, expires_at=DATES)
    def reschedule(self, review_after: datetime | None, expires_at: datetime | None) -> None:
        before = self.memory.revision
        self.memory.reschedule(review_after=review_after, expires_at=expires_at)
        assert (self.memory.review_after, self.memory.expires_at) == (review_after, expires_at)
        assert self.memory.revision == before

    @precondition(lambda self: not self.forgotten)
    @rule()
    def forget(self) -> None:
        self.final_revision = self.memory.revision
        self.memory.forget(NOW)
        self.forgotten = True

    # Once forgotten, every command raises MemoryForgotten.

    @precondition(lambda self: self.forgotten)
    @rule(command=st.sampled_from(sorted(COMMANDS_AFTER_FORGET)))
    def command_after_forget(self, command: str) -> None:
        try:
            COMMANDS_AFTER_FORGET[command](self.memory)
        except MemoryForgotten:
            pass
        else:
            raise AssertionError(f"{command} succeeded on a forgotten memory")

    # Invariants.

    @invariant()
    def status_is_known(self) -> None:
        assert self.memory.status in {"active", "suppressed", "forgotten"}
        assert self.memory.is_forgotten is self.forgotten

    @invariant()
    def revision_counts_the_content_versions(self) -> None:
        if self.forgotten:
            assert self.memory.revision == self.final_revision
            assert self.memory.versions == []
            assert self.memory.content == ""
        else:
            assert self.memory.revision == len(self.memory.versions)
            assert [v.revision for v in self.memory.versions] == list(
                range(1, self.memory.revision + 1)
            )

    @invariant()
    def content_is_the_last_version(self) -> None:
        if not self.forgotten:
            last = self.memory.versions[-1]
            assert (self.memory.content, self.memory.category) == (last.content, last.category)

    @invariant()
    def replaying_the_events_rebuilds_the_same_memory(self) -> None:
        self.history.extend(self.memory.collect_events())
        assert [e.originator_version for e in self.history] == list(range(1, len(self.history) + 1))
        rebuilt = replay(self.history)
        assert rebuilt.revision == self.memory.revision
        assert rebuilt.status == self.memory.status
        assert rebuilt.content == self.memory.content
        assert rebuilt.versions == self.memory.versions
        assert state(rebuilt) == state(self.memory)

    @invariant()
    def content_revisions_rise_by_one(self) -> None:
        revisions = [e.revision for e in self.history if isinstance(e, Memory.ContentChanged)]
        assert revisions == list(range(2, len(revisions) + 2))


MemoryLifecycle.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMemoryLifecycle = MemoryLifecycle.TestCase


def test_new_makes_the_event_and_memory_the_librarys_create_makes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Memory.Created, "create_timestamp", staticmethod(lambda: NOW))
    fields = created_fields(origin={"system": "legacy-coremem"}, review_after=REVIEW_AFTER)
    lean = Memory.new(MEMORY_ID, **fields)
    library = Memory._create(Memory.Created, id=MEMORY_ID, revision=1, **fields)
    (lean_event,) = lean.collect_events()
    (library_event,) = library.collect_events()
    assert type(lean_event) is type(library_event)
    assert vars(lean_event) == vars(library_event)
    assert state(lean) == state(library)


def test_new_refuses_an_id_that_is_not_a_uuid() -> None:
    with pytest.raises(TypeError):
        Memory.new(str(MEMORY_ID), **created_fields())  # type: ignore[arg-type]
