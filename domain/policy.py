"""The effective permission of an agent tool call (CORE_MEMORY_DESIGN.md sections 11, 12).

Effective permission = workspace memory policy ∩ conversation mode ∩ tool scope ∩ the user's
settings. Each of those is a rule that permits some tools in some turns; a call is allowed when
every rule permits its tool. When several rules deny a call, the reason of the first one in
`PRECEDENCE` is reported, from the broadest denial to the narrowest:

1. `workspace_required`    the token names no workspace: no tool call has a scope to run in.
2. `isolated_mode`         the conversation is isolated: no memory is read or written.
3. `tool_not_allowed`      the workspace policy or the token's `tools` claim excludes the tool.
4. `memory_disabled`       the user turned saved memory off: every tool is denied.
5. `no_write_mode`         the conversation may read only: save/update/forget/propose denied.
6. `auto_extract_disabled` the user turned inferred memories off: propose denied.

The first three come from the turn's token alone; `memory_disabled` outranks `no_write_mode`
because it says more (reads are denied too), and a mode denial outranks the narrower
`auto_extract_disabled`. An unknown mode fails closed, like `isolated`.

What an allowed search may return is the visibility and shadowing rule (section 10), stated once
at the end of this module: a memory takes part in a search for an agent in workspace W when it
is

1. retrievable: `status = 'active'` and not expired (`expires_at` unset or after now);
2. visible: global, or in W itself (`is_visible`, `visible_scopes(W)`);
3. not shadowed: a global memory is hidden when a memory of W that is itself retrievable holds
   the same `memory_key` (the workspace value overrides the global one).

`visible_rows` applies the rule to rows in Python. The same rule has two faster forms, which
must stay equal to this one (tests/retrieval/test_search_fetch.py and test_vector_matrix.py
compare them with it): SQL, for the narrow lexical fetch, in retrieval/fetch_sql.py
(`Statements` filters scope, status and expiry and computes `hidden` per row from live
workspace rows with the same key; `projections.views.search_terms.next_shadow_expiry` says
when a hiding row expires); numpy, for vector search,
`retrieval.vectors.matrix.UserVectors.visible`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, TypeVar

from domain.errors import PolicyDenied
from domain.model.values import WORKSPACES, Scope

__all__ = [
    "ALL_TOOLS",
    "PRECEDENCE",
    "READ_TOOLS",
    "WORKSPACE_TOOLS",
    "WRITE_TOOLS",
    "MemorySwitches",
    "TurnContext",
    "VisibleRow",
    "decide",
    "denial",
    "effective_tools",
    "is_visible",
    "retrievable",
    "shadow_global",
    "tool_scope",
    "visible_rows",
    "visible_scopes",
]

READ_TOOLS: Final = frozenset({"search_core_memories", "list_core_memories"})
WRITE_TOOLS: Final = frozenset(
    {"save_core_memory", "update_core_memory", "forget_core_memory", "propose_core_memory"}
)
ALL_TOOLS: Final = READ_TOOLS | WRITE_TOOLS
PROPOSE: Final = "propose_core_memory"

WORKSPACE_TOOLS: Final[dict[str, frozenset[str]]] = {w: ALL_TOOLS for w in WORKSPACES}
"""Workspace memory policy: the tools each workspace offers (all three share the common set)."""

_NOTHING: Final[frozenset[str]] = frozenset()
_MODE_TOOLS: Final[dict[str, frozenset[str]]] = {
    "normal": ALL_TOOLS,
    "no_write": READ_TOOLS,
    "isolated": _NOTHING,
}


class MemorySwitches(Protocol):
    """The user's memory settings, as the policy needs them (e.g. a SettingsState)."""

    @property
    def saved_memory_enabled(self) -> bool: ...

    @property
    def auto_extract_enabled(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What the trusted token says about this agent turn, plus the user's settings."""

    workspace: str | None
    mode: str
    allowed_tools: frozenset[str] | None
    settings: MemorySwitches


def _has_workspace(tool: str, c: TurnContext) -> bool:
    return c.workspace is not None


def _not_isolated(tool: str, c: TurnContext) -> bool:
    return c.mode in _MODE_TOOLS and c.mode != "isolated"


def _in_tool_scope(tool: str, c: TurnContext) -> bool:
    offered = WORKSPACE_TOOLS.get(c.workspace or "", _NOTHING)
    return tool in offered and (c.allowed_tools is None or tool in c.allowed_tools)


def _memory_enabled(tool: str, c: TurnContext) -> bool:
    return c.settings.saved_memory_enabled


def _mode_allows(tool: str, c: TurnContext) -> bool:
    return tool in _MODE_TOOLS.get(c.mode, _NOTHING)


def _extraction_allowed(tool: str, c: TurnContext) -> bool:
    return c.settings.auto_extract_enabled or tool != PROPOSE


PRECEDENCE: Final[tuple[tuple[str, Callable[[str, TurnContext], bool]], ...]] = (
    ("workspace_required", _has_workspace),
    ("isolated_mode", _not_isolated),
    ("tool_not_allowed", _in_tool_scope),
    ("memory_disabled", _memory_enabled),
    ("no_write_mode", _mode_allows),
    ("auto_extract_disabled", _extraction_allowed),
)
"""Each rule (does it permit this tool here?) with its denial reason, in order of precedence."""


def denial(tool: str, context: TurnContext) -> str | None:
    """The reason a call of `tool` is denied (first rule in PRECEDENCE), or None if allowed."""
    for reason, permits in PRECEDENCE:
        if not permits(tool, context):
            return reason
    return None


def effective_tools(context: TurnContext) -> frozenset[str]:
    """The tools this turn may call: those every rule permits (their intersection)."""
    return frozenset(t for t in ALL_TOOLS if denial(t, context) is None)


def decide(
    tool: str,
    *,
    workspace: str | None,
    mode: str,
    allowed_tools: frozenset[str] | None,
    settings: MemorySwitches,
) -> None:
    """Allow the call, or raise PolicyDenied with the reason of highest precedence."""
    reason = denial(tool, TurnContext(workspace, mode, allowed_tools, settings))
    if reason is not None:
        raise PolicyDenied(reason, f"{tool} is not allowed here: {reason}")


def visible_scopes(workspace: str) -> tuple[Scope, Scope]:
    """The scopes an agent in `workspace` may see: global and that workspace's own."""
    return Scope.global_(), Scope.workspace(workspace)


def is_visible(scope_type: str, workspace_type: str | None, workspace: str) -> bool:
    """True when a memory in this scope is visible to an agent in `workspace`."""
    return any(
        (s.scope_type, s.workspace_type) == (scope_type, workspace_type)
        for s in visible_scopes(workspace)
    )


def tool_scope(scope_type: str, workspace: str) -> Scope:
    """The scope a tool body names: `workspace` always means the token's workspace."""
    return Scope(scope_type, None if scope_type == "global" else workspace)


# -- what a search may return ------------------------------------------------------------------


class VisibleRow(Protocol):
    """What the visibility rule reads of a memory: a `MemoryRow` (a command's `MemoryState`
    too) or retrieval's `SearchRow`."""

    @property
    def scope_type(self) -> str: ...

    @property
    def workspace_type(self) -> str | None: ...

    @property
    def memory_key(self) -> str: ...

    def is_retrievable(self, now: datetime) -> bool: ...


R = TypeVar("R", bound=VisibleRow)


def retrievable(status: str, expires_at: datetime | None, now: datetime) -> bool:
    """True for an active memory that has not expired: only those take part in retrieval."""
    return status == "active" and (expires_at is None or expires_at > now)


def shadow_global(rows: Iterable[R]) -> list[R]:
    """Drop each global memory whose key a workspace memory among `rows` also holds."""
    pool = list(rows)
    overridden = {r.memory_key for r in pool if r.scope_type == "workspace"}
    return [r for r in pool if r.scope_type == "workspace" or r.memory_key not in overridden]


def visible_rows(rows: Iterable[R], workspace: str, now: datetime) -> list[R]:
    """The rows an agent in `workspace` may be given now: retrievable, visible, not shadowed."""
    return shadow_global(
        r
        for r in rows
        if r.is_retrievable(now) and is_visible(r.scope_type, r.workspace_type, workspace)
    )
