"""The effective permission of agent tool calls: every reason, and which one wins."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from domain.errors import InvalidInput, PolicyDenied
from domain.model.values import WORKSPACES, Scope
from domain.policy import (
    ALL_TOOLS,
    PRECEDENCE,
    READ_TOOLS,
    WRITE_TOOLS,
    TurnContext,
    decide,
    denial,
    effective_tools,
    is_visible,
    tool_scope,
    visible_scopes,
)

PROPOSE = "propose_core_memory"


@dataclass(frozen=True)
class Switches:
    saved_memory_enabled: bool = True
    auto_extract_enabled: bool = True


ON = Switches()
OFF = Switches(saved_memory_enabled=False)
NO_EXTRACT = Switches(auto_extract_enabled=False)


def context(
    workspace: str | None = "learning",
    mode: str = "normal",
    tools: frozenset[str] | None = None,
    settings: Switches = ON,
) -> TurnContext:
    return TurnContext(workspace, mode, tools, settings)


def expected_reason(tool: str, c: TurnContext) -> str | None:
    """The contract's rules written out plainly, in the documented order of precedence."""
    if c.workspace is None:
        return "workspace_required"
    if c.mode == "isolated":
        return "isolated_mode"
    if c.allowed_tools is not None and tool not in c.allowed_tools:
        return "tool_not_allowed"
    if not c.settings.saved_memory_enabled:
        return "memory_disabled"
    if c.mode == "no_write" and tool in WRITE_TOOLS:
        return "no_write_mode"
    if not c.settings.auto_extract_enabled and tool == PROPOSE:
        return "auto_extract_disabled"
    return None


def test_the_write_tools_are_save_update_forget_and_propose() -> None:
    assert {
        "save_core_memory",
        "update_core_memory",
        "forget_core_memory",
        "propose_core_memory",
    } == WRITE_TOOLS
    assert {"search_core_memories", "list_core_memories"} == READ_TOOLS
    assert ALL_TOOLS == READ_TOOLS | WRITE_TOOLS


def test_the_precedence_is_the_documented_order() -> None:
    assert [reason for reason, _ in PRECEDENCE] == [
        "workspace_required",
        "isolated_mode",
        "tool_not_allowed",
        "memory_disabled",
        "no_write_mode",
        "auto_extract_disabled",
    ]


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_a_normal_turn_in_a_workspace_may_call_every_tool(tool: str) -> None:
    assert denial(tool, context()) is None
    decide(tool, workspace="teaching", mode="normal", allowed_tools=None, settings=ON)


@pytest.mark.parametrize(
    ("tool", "turn", "reason"),
    [
        ("search_core_memories", context(workspace=None), "workspace_required"),
        ("list_core_memories", context(workspace=None, mode="isolated"), "workspace_required"),
        ("search_core_memories", context(mode="isolated"), "isolated_mode"),
        ("save_core_memory", context(mode="isolated"), "isolated_mode"),
        ("list_core_memories", context(tools=frozenset({"search"})), "tool_not_allowed"),
        ("save_core_memory", context(tools=frozenset()), "tool_not_allowed"),
        ("search_core_memories", context(settings=OFF), "memory_disabled"),
        ("list_core_memories", context(settings=OFF), "memory_disabled"),
        ("save_core_memory", context(mode="no_write"), "no_write_mode"),
        ("update_core_memory", context(mode="no_write"), "no_write_mode"),
        ("forget_core_memory", context(mode="no_write"), "no_write_mode"),
        ("propose_core_memory", context(mode="no_write"), "no_write_mode"),
        (PROPOSE, context(settings=NO_EXTRACT), "auto_extract_disabled"),
    ],
)  # fmt: skip
def test_each_reason_denies_what_the_contract_says(
    tool: str, turn: TurnContext, reason: str
) -> None:
    assert denial(tool, turn) == reason
    with pytest.raises(PolicyDenied) as raised:
        decide(
            tool,
            workspace=turn.workspace,
            mode=turn.mode,
            allowed_tools=turn.allowed_tools,
            settings=turn.settings,
        )
    assert raised.value.reason == reason


@pytest.mark.parametrize("tool", sorted(READ_TOOLS))
def test_no_write_mode_still_allows_reading(tool: str) -> None:
    assert denial(tool, context(mode="no_write")) is None


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS - {PROPOSE}))
def test_auto_extract_off_denies_only_propose(tool: str) -> None:
    assert denial(tool, context(settings=NO_EXTRACT)) is None


def test_a_tools_claim_that_lists_the_tool_allows_it() -> None:
    assert denial("save_core_memory", context(tools=frozenset({"save_core_memory"}))) is None


@pytest.mark.parametrize(
    ("turn", "reason"),
    [
        (context(workspace=None, mode="isolated", tools=frozenset(),
                 settings=Switches(False, False)), "workspace_required"),
        (context(mode="isolated", tools=frozenset(), settings=Switches(False, False)),
         "isolated_mode"),
        (context(mode="no_write", tools=frozenset(), settings=Switches(False, False)),
         "tool_not_allowed"),
        (context(mode="no_write", settings=Switches(False, False)), "memory_disabled"),
        (context(mode="no_write", settings=Switches(True, False)), "no_write_mode"),
        (context(settings=Switches(True, False)), "auto_extract_disabled"),
    ],
)  # fmt: skip
def test_when_several_rules_deny_the_first_in_precedence_is_reported(
    turn: TurnContext, reason: str
) -> None:
    assert denial(PROPOSE, turn) == reason


WORKSPACE_CHOICES = (None, "learning")
MODE_CHOICES = ("normal", "no_write", "isolated")
SETTINGS_CHOICES = tuple(Switches(a, b) for a, b in itertools.product((True, False), repeat=2))


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_every_combination_matches_the_rules_written_out(tool: str) -> None:
    claims = (None, frozenset({tool}), frozenset(ALL_TOOLS - {tool}))
    for workspace, mode, tools, settings in itertools.product(
        WORKSPACE_CHOICES, MODE_CHOICES, claims, SETTINGS_CHOICES
    ):
        turn = context(workspace, mode, tools, settings)
        reason = expected_reason(tool, turn)
        assert denial(tool, turn) == reason, turn
        assert (tool in effective_tools(turn)) == (reason is None), turn


def test_an_unknown_mode_fails_closed_like_isolated() -> None:
    assert denial("search_core_memories", context(mode="chatty")) == "isolated_mode"
    assert effective_tools(context(mode="chatty")) == frozenset()


def test_an_unknown_tool_is_never_allowed() -> None:
    assert denial("drop_all_memories", context()) == "tool_not_allowed"


def test_effective_tools_is_the_intersection_of_the_rules() -> None:
    turn = context(
        mode="no_write",
        tools=frozenset({"search_core_memories", "save_core_memory"}),
    )
    assert effective_tools(turn) == {"search_core_memories"}
    assert effective_tools(context(settings=Switches(True, False))) == ALL_TOOLS - {PROPOSE}
    assert effective_tools(context(settings=Switches(False, True))) == frozenset()


# -- visibility --------------------------------------------------------------------------------


@pytest.mark.parametrize("workspace", WORKSPACES)
def test_a_workspace_sees_global_and_its_own_scope_only(workspace: str) -> None:
    assert visible_scopes(workspace) == (Scope.global_(), Scope.workspace(workspace))
    assert is_visible("global", None, workspace)
    assert is_visible("workspace", workspace, workspace)
    for other in set(WORKSPACES) - {workspace}:
        assert not is_visible("workspace", other, workspace)


def test_a_tool_bodys_workspace_scope_is_the_tokens_workspace() -> None:
    assert tool_scope("workspace", "research") == Scope.workspace("research")
    assert tool_scope("global", "research") == Scope.global_()
    with pytest.raises(InvalidInput):
        tool_scope("project", "research")
