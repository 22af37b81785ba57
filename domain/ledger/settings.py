"""Commands on a user's memory settings: read them, flip the two switches."""

from __future__ import annotations

from domain.context import retrying
from domain.ledger.store import AggregateStore
from domain.model.memory_settings import MemorySettings, SettingsState

__all__ = ["SettingsCommands"]


class SettingsCommands:
    """The user's switches: saved memory and automatic extraction (both on until changed)."""

    def __init__(self, store: AggregateStore) -> None:
        self.store = store

    def get(self, user_id: str) -> SettingsState:
        """The user's settings (defaults until first changed)."""
        return SettingsState.of(self.store.settings(user_id))

    def change(
        self,
        user_id: str,
        *,
        saved_memory_enabled: bool | None = None,
        auto_extract_enabled: bool | None = None,
    ) -> tuple[SettingsState, int | None]:
        """Change one or both switches; returns the settings and the ledger position."""

        def attempt() -> tuple[SettingsState, int | None]:
            settings = self.store.settings(user_id) or MemorySettings(user_id=user_id)
            changed = settings.change(
                saved_memory_enabled=saved_memory_enabled,
                auto_extract_enabled=auto_extract_enabled,
            )
            position = self.store.save(settings) if changed or settings.version == 1 else None
            return SettingsState.of(settings), position

        return retrying(attempt)
