"""The user's memory settings: whether agents may use memory, and may propose to it."""

from __future__ import annotations

from domain.ledger.results import Outcome
from domain.model.memory_settings import SettingsState
from service.caller import Identity
from service.ports import Ports

__all__ = ["change", "current"]


def current(ports: Ports, caller: Identity) -> SettingsState:
    """The user's settings (both on until changed)."""
    return ports.ledger.get_settings(caller.user_id)


def change(
    ports: Ports,
    caller: Identity,
    *,
    saved_memory_enabled: bool | None = None,
    auto_extract_enabled: bool | None = None,
) -> SettingsState:
    """Turn the agent tools' use of memory, or their proposals, on or off (None: unchanged)."""
    view, position = ports.ledger.change_settings(
        caller.user_id,
        saved_memory_enabled=saved_memory_enabled,
        auto_extract_enabled=auto_extract_enabled,
    )
    ports.wrote(caller.user_id, Outcome("changed", position=position))
    return view
