"""Who calls a use case: the user, and for an agent turn its workspace, mode and tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.errors import PolicyDenied

__all__ = ["Identity", "require_owner"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling, from where and with what: the token's claims, checked."""

    user_id: str
    roles: frozenset[str] = frozenset()
    workspace: str | None = None
    mode: str = "normal"
    tools: frozenset[str] | None = None
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_agent_turn(self) -> bool:
        """A token of one agent turn (mode no_write/isolated, or a tools list): tools only."""
        return self.mode != "normal" or self.tools is not None


def require_owner(caller: Identity) -> None:
    """PolicyDenied `agent_token` for an agent turn: it acts only through the agent tools, so
    its mode can never be widened through the user's own commands (management, audit)."""
    if caller.is_agent_turn:
        raise PolicyDenied("agent_token", "an agent turn's token acts only through the agent tools")
