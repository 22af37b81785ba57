"""The MemorySettings aggregate: a user's switches for the agent tools (section 11)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain.model.values import check_id

__all__ = ["MemorySettings", "SettingsState", "settings_id"]

_NAMESPACE: Final = uuid5(NAMESPACE_URL, "memledger:settings")


def settings_id(user_id: str) -> UUID:
    """The deterministic id of a user's settings aggregate (one per user)."""
    return uuid5(_NAMESPACE, user_id)


class MemorySettings(Aggregate):
    """`saved_memory_enabled` and `auto_extract_enabled`, both true until changed."""

    TOPIC = "memledger:MemorySettings"

    class Event(Aggregate.Event):
        """Base of settings events: each says in clear whose settings they are."""

        user_id: str

    class Created(Event, Aggregate.Created):
        """The user changed a setting for the first time."""

        TOPIC = "memledger:MemorySettings.Created"

    class Changed(Event):
        """One or both switches changed."""

        TOPIC = "memledger:MemorySettings.Changed"
        saved_memory_enabled: bool
        auto_extract_enabled: bool

        def apply(self, aggregate: Any) -> None:
            aggregate.saved_memory_enabled = self.saved_memory_enabled
            aggregate.auto_extract_enabled = self.auto_extract_enabled

    class Erased(Event):
        """The user was erased; settings are back to their defaults."""

        TOPIC = "memledger:MemorySettings.Erased"

        def apply(self, aggregate: Any) -> None:
            aggregate.saved_memory_enabled = True
            aggregate.auto_extract_enabled = True

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.saved_memory_enabled = True
        self.auto_extract_enabled = True

    @staticmethod
    def create_id(user_id: str) -> UUID:
        """See settings_id."""
        return settings_id(user_id)

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Trigger an event stamped with the settings' owner."""
        super().trigger_event(event_class, user_id=self.user_id, **kwargs)

    def change(
        self, *, saved_memory_enabled: bool | None, auto_extract_enabled: bool | None
    ) -> bool:
        """Apply the given switches; False when nothing changes."""
        check_id("user_id", self.user_id)  # stored in clear (erasing an odd legacy id still works)
        saved = self.saved_memory_enabled if saved_memory_enabled is None else saved_memory_enabled
        auto = self.auto_extract_enabled if auto_extract_enabled is None else auto_extract_enabled
        if (saved, auto) == (self.saved_memory_enabled, self.auto_extract_enabled):
            return False
        self.trigger_event(self.Changed, saved_memory_enabled=saved, auto_extract_enabled=auto)
        return True

    def erase(self) -> None:
        """Reset to defaults as part of erasing the user."""
        self.trigger_event(self.Erased)


@dataclass(frozen=True, slots=True)
class SettingsState:
    """A user's memory settings."""

    saved_memory_enabled: bool = True
    auto_extract_enabled: bool = True

    @classmethod
    def of(cls, settings: MemorySettings | None) -> SettingsState:
        """Snapshot an aggregate (defaults when the user never changed anything)."""
        if settings is None:
            return cls()
        return cls(settings.saved_memory_enabled, settings.auto_extract_enabled)
