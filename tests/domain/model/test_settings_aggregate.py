"""The MemorySettings aggregate: given events, when a command, then the events it records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.model.memory_settings import MemorySettings, settings_id
from tests.domain.model.aggregate_steps import given as steps_given
from tests.domain.model.aggregate_steps import replay, state, then

Step = Callable[[MemorySettings], Any]


def given(*steps: Step, user_id: str = "user-1") -> MemorySettings:
    """Settings rebuilt from their Created event followed by `steps` (none pending)."""
    return steps_given(MemorySettings(user_id=user_id), *steps)


def changed(*, saved: bool | None = None, auto: bool | None = None) -> Step:
    return lambda s: s.change(saved_memory_enabled=saved, auto_extract_enabled=auto)


def test_new_settings_record_created_for_the_user() -> None:
    settings = MemorySettings(user_id="user-1")

    events = then(settings)

    assert [type(e) for e in events] == [MemorySettings.Created]
    assert events[0].user_id == "user-1"


def test_new_settings_enable_saved_memory_and_auto_extract() -> None:
    settings = MemorySettings(user_id="user-1")

    assert settings.saved_memory_enabled is True
    assert settings.auto_extract_enabled is True


def test_the_settings_id_is_derived_from_the_user_id() -> None:
    assert MemorySettings(user_id="user-1").id == settings_id("user-1")
    assert settings_id("user-1") == settings_id("user-1")
    assert settings_id("user-1") != settings_id("user-2")
    assert MemorySettings.create_id("user-1") == settings_id("user-1")


def test_switching_one_setting_off_records_both_switches() -> None:
    settings = given()

    assert settings.change(saved_memory_enabled=False, auto_extract_enabled=None) is True

    events = then(settings)
    assert [type(e) for e in events] == [MemorySettings.Changed]
    assert (events[0].saved_memory_enabled, events[0].auto_extract_enabled) == (False, True)
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (False, True)


def test_switching_both_settings_off_records_one_change() -> None:
    settings = given()

    assert settings.change(saved_memory_enabled=False, auto_extract_enabled=False) is True

    assert [type(e) for e in then(settings)] == [MemorySettings.Changed]
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (False, False)


def test_an_omitted_switch_keeps_its_current_value() -> None:
    settings = given(changed(saved=False))

    settings.change(saved_memory_enabled=None, auto_extract_enabled=False)

    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (False, False)


def test_a_change_that_names_no_switch_records_nothing() -> None:
    settings = given()

    assert settings.change(saved_memory_enabled=None, auto_extract_enabled=None) is False

    assert then(settings) == []


def test_a_change_to_the_current_values_records_nothing() -> None:
    settings = given(changed(auto=False))

    assert settings.change(saved_memory_enabled=True, auto_extract_enabled=False) is False

    assert then(settings) == []


def test_switching_a_setting_back_on_records_a_change() -> None:
    settings = given(changed(saved=False))

    assert settings.change(saved_memory_enabled=True, auto_extract_enabled=None) is True

    assert settings.saved_memory_enabled is True


def test_erasing_records_erased_and_resets_to_the_defaults() -> None:
    settings = given(changed(saved=False, auto=False))

    settings.erase()

    assert [type(e) for e in then(settings)] == [MemorySettings.Erased]
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (True, True)


def test_replaying_the_events_rebuilds_equal_settings() -> None:
    settings = MemorySettings(user_id="user-1")
    settings.change(saved_memory_enabled=False, auto_extract_enabled=None)
    settings.change(saved_memory_enabled=None, auto_extract_enabled=False)
    settings.erase()
    settings.change(saved_memory_enabled=None, auto_extract_enabled=False)

    rebuilt = replay(settings.collect_events())

    assert state(rebuilt) == state(settings)
    assert (rebuilt.saved_memory_enabled, rebuilt.auto_extract_enabled) == (True, False)
