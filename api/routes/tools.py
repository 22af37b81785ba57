"""Agent tools (API_CONTRACT.md, 'Agent tools'): the six memory tools a model may call.

User, workspace and mode come only from the token. Every call is checked in the contract's
order: identity (401), body (422, domain value checks included), policy (403, see
domain/policy.py), then the memory itself (404 / 410 / 409).

What the tools see: the active, unexpired memories in `global` and the token's workspace.
Anything else (another workspace's memory, a suppressed or expired one, another user's) is
404 to every tool, update and forget included; a forgotten memory is 410 only if its scope
was visible, else 404 too. `list_core_memories` shows both a global memory and a workspace
memory with the same key (each says its scope); `search_core_memories` lets the workspace one
hide the global one.

A memory a tool may not see is never returned, compared against or confirmed, and no answer
carries its id, revision or state (api/routes/tool_visibility.py): saving or proposing under
the key of a suppressed or expired memory records a replace candidate for the user, whether or
not the content is the same, which the agent is shown as a new-memory proposal.

Content rules: save, update and propose also apply the content rules of the token's workspace
(domain/model/workspace_rules.py) whatever the scope, so a teaching agent cannot park a
student's details in a global memory either; refusals are 422 like any invalid value.

Audit (section 17): each search records the returned memory ids (`memory.search`), each list the
listed ones (`memory.read`), each denial its reason (`memory.policy_denied`), through the
services' AccessLog: queued on the request, written to the ledger in the background, never with
content or query text. Search results are cached briefly (retrieval/search.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from fastapi import APIRouter, Query

from api.deps import (
    ActiveMemoryReads,
    CurrentIdentity,
    Identity,
    SearchReads,
    Services,
    ServicesDep,
    VisibilityReads,
)
from api.routes.tool_visibility import agent_candidate, sees, visible_memory
from api.schemas.function_calling import FunctionTool, function_tools
from api.schemas.memories import memory_out
from api.schemas.tools import (
    ForgetBody,
    ForgetResult,
    ListBody,
    ListResult,
    ProposeBody,
    ProposeResult,
    SaveBody,
    SaveResult,
    SearchBody,
    SearchHit,
    SearchResultOut,
    ToolSpec,
    UpdateBody,
    UpdateResult,
    tool_specs,
)
from domain import policy
from domain.context import Retry, current_request_id, retrying
from domain.errors import KeyExists, MemoryForgotten, NotFound, PolicyDenied
from domain.ledger.access import AccessHit
from domain.ledger.results import MemoryState, Outcome
from domain.model.values import Scope, check_category, check_content, check_key, normalise_content
from domain.model.workspace_rules import check_workspace_content
from retrieval.query import due_for_review

__all__ = ["router"]

router = APIRouter(prefix="/tools", tags=["agent tools"])

_log = logging.getLogger("memledger.tools")
LIST_LIMIT: Final = 200
_OWN: Final = frozenset(("tokens", "relevance"))
"""SearchHit fields that are the search's, not the row's."""


@router.get("", response_model=list[ToolSpec] | list[FunctionTool])
def list_tools(
    identity: CurrentIdentity,
    format: Annotated[
        Literal["default", "openai"],
        Query(description="openai: strict function-calling definitions (every field required)"),
    ] = "default",
) -> list[ToolSpec] | list[FunctionTool]:
    """Every tool with a description and a JSON Schema of its body (for function calling)."""
    return function_tools(tool_specs()) if format == "openai" else tool_specs()


@router.post("/search_core_memories", response_model=SearchResultOut)
def search_core_memories(
    body: SearchBody, identity: CurrentIdentity, services: ServicesDep, reads: SearchReads
) -> SearchResultOut:
    """A few relevant memories within the token budget; no match: no items."""
    with (
        _tool(services, identity, "search_core_memories") as workspace,
        services.limits.hold(identity.user_id, "search"),  # UserBusy: 429 (api/limits.py)
    ):
        assert services.search is not None  # built with the services
        found = services.search(
            reads,
            identity.user_id,
            workspace,
            body.query,
            now=services.ledger.clock(),
            category=body.category,
            limit=body.limit,
            min_relevance=body.min_relevance,
        )
        result = found.result
        if services.access_log is not None:
            services.access_log.searched(
                identity.user_id,
                "search_core_memories",
                workspace,
                [
                    AccessHit(
                        c.memory_id,
                        c.scope_type,
                        c.workspace_type,
                        found.revisions.get(c.memory_id),
                    )
                    for c in (i.row for i in result.items)
                ],
            )
        metrics = services.metrics
        metrics.searches.labels("hit" if result.items else "empty").inc()
        metrics.search_items.observe(len(result.items))
        metrics.search_tokens.observe(result.total_tokens)
        _log.info(
            "memory.search items=%d tokens=%d cached=%s",
            len(result.items),
            result.total_tokens,
            found.cached,
            extra={"request_id": current_request_id(), "user_id": identity.user_id},
        )
        items = [
            SearchHit.model_validate(
                {
                    **{k: getattr(i.row, k) for k in SearchHit.model_fields if k not in _OWN},
                    "content": i.content,
                    "tokens": i.tokens,
                    "relevance": i.relevance,
                }
            )
            for i in result.items
        ]
        return SearchResultOut(items=items, total_tokens=result.total_tokens)


@router.post("/list_core_memories", response_model=ListResult)
def list_core_memories(
    body: ListBody, identity: CurrentIdentity, services: ServicesDep, reads: ActiveMemoryReads
) -> ListResult:
    """The visible active, unexpired memories, newest first (at most 200)."""
    with _tool(services, identity, "list_core_memories") as workspace:
        scopes = [
            s for s in policy.visible_scopes(workspace) if body.scope_type in (None, s.scope_type)
        ]
        rows = reads.retrievable_memories(
            identity.user_id, scopes, now=services.ledger.clock(), limit=LIST_LIMIT
        )
        services.record_read(identity.user_id, "list_core_memories", rows, workspace=workspace)
        return ListResult(items=[memory_out(r) for r in rows])


@router.post("/save_core_memory", response_model=SaveResult)
def save_core_memory(
    body: SaveBody, identity: CurrentIdentity, services: ServicesDep
) -> SaveResult:
    """Save on the user's explicit request; a new value for a taken key becomes a candidate."""
    _check_values(body.memory_key, body.content, body.category, identity.workspace)
    with _tool(services, identity, "save_core_memory") as workspace:
        user_id, scope = identity.user_id, policy.tool_scope(body.scope_type, workspace)

        def attempt() -> Outcome | SaveResult:
            try:
                outcome = services.ledger.create_memory(
                    user_id,
                    scope=scope,
                    memory_key=body.memory_key,
                    content=body.content,
                    category=body.category,
                    source_type="explicit",
                    changed_via="agent_tool",
                )
                assert outcome.memory is not None
                if outcome.status == "created" or sees(services, workspace, outcome.memory):
                    return outcome
                # The same content as a memory this agent may not see (suppressed, expired):
                # answered like any other content, so the agent cannot confirm a guess.
                target = outcome.memory.memory_id
            except KeyExists as taken:
                # Section 9.3: a conflicting value never overwrites; the user decides.
                target = taken.memory_id
            try:
                return _propose_replacement(services, workspace, user_id, scope, body, target)
            except MemoryForgotten:
                # Forgotten since: the key is free, or taken again by a racing save; a 409 or
                # 410 is outside this tool's contract, so the save runs again on fresh state.
                raise Retry("the key's memory was forgotten meanwhile") from None

        answer = retrying(attempt)
        if isinstance(answer, SaveResult):
            return answer
        memory = services.wrote(user_id, answer).memory
        assert memory is not None
        if answer.status == "unchanged":
            memory = _reconfirm_if_due(services, user_id, memory)
        return SaveResult(status=answer.status, memory=memory_out(memory))  # type: ignore[arg-type]


@router.post("/update_core_memory", response_model=UpdateResult)
def update_core_memory(
    body: UpdateBody, identity: CurrentIdentity, services: ServicesDep, reads: VisibilityReads
) -> UpdateResult:
    """Correct content and/or category at the memory's current revision."""
    _check_values(None, body.content, body.category, identity.workspace)
    with _tool(services, identity, "update_core_memory") as workspace:
        current = visible_memory(services, reads, identity.user_id, workspace, body.memory_id)
        outcome = services.ledger.update_memory(
            identity.user_id,
            body.memory_id,
            expected_revision=current.revision,
            content=body.content,
            category=body.category,
            changed_via="agent_tool",
        )
        memory = services.wrote(identity.user_id, outcome).memory
        assert memory is not None
        if outcome.status == "updated":
            services.metrics.corrections.inc()
        return UpdateResult(status=outcome.status, memory=memory_out(memory))  # type: ignore[arg-type]


@router.post("/forget_core_memory", response_model=ForgetResult)
def forget_core_memory(
    body: ForgetBody, identity: CurrentIdentity, services: ServicesDep, reads: VisibilityReads
) -> ForgetResult:
    """Forget irrecoverably."""
    with _tool(services, identity, "forget_core_memory") as workspace:
        visible_memory(services, reads, identity.user_id, workspace, body.memory_id)
        services.wrote(
            identity.user_id, services.ledger.forget_memory(identity.user_id, body.memory_id)
        )
        return ForgetResult(status="forgotten")


@router.post("/propose_core_memory", response_model=ProposeResult)
def propose_core_memory(
    body: ProposeBody, identity: CurrentIdentity, services: ServicesDep, reads: ActiveMemoryReads
) -> ProposeResult:
    """Inferred information becomes a candidate (a replace candidate when the key is taken)."""
    key, content, category = _check_values(
        body.memory_key, body.content, body.category, identity.workspace
    )
    with _tool(services, identity, "propose_core_memory") as workspace:
        user_id, scope = identity.user_id, policy.tool_scope(body.scope_type, workspace)
        existing = reads.memory_by_key(user_id, scope, key)
        visible = existing is not None and sees(services, workspace, existing)
        if visible and _same(existing, content, category):  # never compared with a hidden one
            services.wrote(user_id, Outcome("duplicate"))  # nothing appended: X-Position, head
            return ProposeResult(status="duplicate")  # already remembered: nothing to propose
        outcome = services.ledger.propose_candidate(
            user_id,
            operation="create" if existing is None else "replace",
            scope=scope,
            memory_key=body.memory_key,
            content=body.content,
            category=body.category,
            target_memory_id=None if existing is None else existing["memory_id"],
            source_conversation_id=body.source_conversation_id,
        )
        services.wrote(user_id, outcome)
        return ProposeResult(
            status=outcome.status,  # type: ignore[arg-type]
            candidate=agent_candidate(outcome.candidate, target_visible=visible)
            if outcome.candidate
            else None,
        )


@router.post("/{name}", include_in_schema=False)
def unknown_tool(name: str, identity: CurrentIdentity) -> None:
    """Any other name: 404 (after the identity check, like every tool)."""
    raise NotFound(f"no tool named {name!r}")


# -- helpers -----------------------------------------------------------------------------------


@contextmanager
def _tool(services: Services, identity: Identity, tool: str) -> Iterator[str]:
    """Time the call and apply the policy; yields the token's workspace once allowed."""
    started = time.perf_counter()
    try:
        yield _allow(services, identity, tool)
    finally:
        services.metrics.tool_latency.labels(tool).observe(time.perf_counter() - started)


def _allow(services: Services, identity: Identity, tool: str) -> str:
    context = policy.TurnContext(
        identity.workspace,
        identity.mode,
        identity.tools,
        services.ledger.get_settings(identity.user_id),
    )
    reason = policy.denial(tool, context)
    if reason is None:
        assert identity.workspace is not None  # the policy's first rule
        return identity.workspace
    services.metrics.denials.labels(reason).inc()
    # The audit trail of section 17 (memory.policy_denied): ids and reason, never content.
    if services.access_log is not None:
        services.access_log.denied(identity.user_id, tool, identity.workspace, reason)
    _log.warning(
        "memory.policy_denied tool=%s reason=%s",
        tool,
        reason,
        extra={"request_id": current_request_id(), "user_id": identity.user_id},
    )
    raise PolicyDenied(reason, f"{tool} is not allowed in this turn: {reason}")


def _check_values(
    memory_key: str | None, content: str | None, category: str | None, workspace: str | None
) -> tuple[str, str, str]:
    """The domain's value checks (422, secrets and workspace rules) before the policy."""
    checked = (
        check_key(memory_key) if memory_key is not None else "",
        check_content(content) if content is not None else "",
        check_category(category) if category is not None else "",
    )
    if content is not None:
        check_workspace_content(workspace, checked[1])
    return checked


def _propose_replacement(
    services: Services, workspace: str, user_id: str, scope: Scope, body: SaveBody, target: UUID
) -> SaveResult:
    current = services.ledger.get_memory(user_id, target)  # forgotten since: MemoryForgotten
    visible = sees(services, workspace, current)
    outcome = services.ledger.propose_candidate(
        user_id,
        operation="replace",
        scope=scope,
        memory_key=body.memory_key,
        content=body.content,
        category=body.category,
        target_memory_id=target,
    )
    services.wrote(user_id, outcome)
    if outcome.candidate is None:
        # The user rejected this very replacement recently: the old value stays, unchanged
        # (and is shown only to an agent that may see it).
        return SaveResult(status="unchanged", memory=memory_out(current) if visible else None)
    # A pending candidate for the same change is the answer to a repeated save, too. About a
    # hidden memory, the agent sees it as a new-memory proposal (api/routes/tool_visibility.py).
    candidate = agent_candidate(outcome.candidate, target_visible=visible)
    return SaveResult(status="candidate_created", candidate=candidate)


def _reconfirm_if_due(services: Services, user_id: str, memory: MemoryState) -> MemoryState:
    """Saving the same content again confirms it, when it was due for review (section 9.3)."""
    now = services.ledger.clock()
    if memory.status != "active" or not due_for_review(
        memory.review_after, memory.last_confirmed_at, now
    ):
        return memory
    try:
        outcome = services.ledger.confirm_memory(user_id, memory.memory_id)
    except MemoryForgotten:
        return memory  # forgotten since this save found it: the save came first
    return services.wrote(user_id, outcome).memory or memory


def _same(row: dict[str, Any], content: str, category: str) -> bool:
    return row["category"] == category and normalise_content(row["content"]) == normalise_content(
        content
    )
