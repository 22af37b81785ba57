"""The agent tools that write: save, update, forget and propose a memory.

Each takes the caller (the token's user, workspace, mode and tools) and the tool's values,
checks them (service/tool_policy.py), acts on the ledger and answers what the agent may see
(service/visibility.py): a conflicting value never overwrites a memory (section 9.3), it
becomes a candidate the user decides on.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from domain import policy
from domain.context import Retry, retrying
from domain.errors import KeyExists, MemoryForgotten
from domain.ledger.results import CandidateState, MemoryRow, MemoryState, Outcome
from domain.model.values import Scope, normalise_content
from projections.views.active_memories import ActiveMemories
from projections.views.audit_log import AuditLog
from retrieval.query import due_for_review
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads
from service.tool_policy import allowed, check_values
from service.visibility import agent_candidate, sees, visible_memory

__all__ = [
    "Proposal",
    "Saved",
    "forget_memory",
    "propose_memory",
    "save_memory",
    "update_memory",
]


@dataclass(frozen=True, slots=True)
class Proposal:
    """A memory the agent asks for: key, content, category and `global` or `workspace`."""

    memory_key: str
    content: str
    category: str
    scope_type: str
    source_conversation_id: str | None = None


@dataclass(frozen=True, slots=True)
class Saved:
    """What a write tool answers: its status, the memory or the candidate the agent may see."""

    status: str
    memory: MemoryState | None = None
    candidate: CandidateState | None = None


def save_memory(ports: Ports, caller: Identity, proposal: Proposal) -> Saved:
    """Save on the user's explicit request; a new value for a taken key becomes a candidate."""
    p = proposal
    check_values(p.memory_key, p.content, p.category, caller.workspace)
    with allowed(ports, caller, "save_core_memory") as workspace:
        user_id, scope = caller.user_id, policy.tool_scope(p.scope_type, workspace)

        def attempt() -> Outcome | Saved:
            try:
                outcome = ports.ledger.create_memory(
                    user_id,
                    scope=scope,
                    memory_key=p.memory_key,
                    content=p.content,
                    category=p.category,
                    source_type="explicit",
                    changed_via="agent_tool",
                )
                assert outcome.memory is not None
                if outcome.status == "created" or sees(ports, workspace, outcome.memory):
                    return outcome
                # The same content as a memory this agent may not see (suppressed, expired):
                # answered like any other content, so the agent cannot confirm a guess.
                target = outcome.memory.memory_id
            except KeyExists as taken:
                # Section 9.3: a conflicting value never overwrites; the user decides.
                target = taken.memory_id
            try:
                return _propose_replacement(ports, workspace, user_id, scope, p, target)
            except MemoryForgotten:
                # Forgotten since: the key is free, or taken again by a racing save; a 409 or
                # 410 is outside this tool's contract, so the save runs again on fresh state.
                raise Retry("the key's memory was forgotten meanwhile") from None

        answer = retrying(attempt)
        if isinstance(answer, Saved):
            return answer
        memory = ports.wrote(user_id, answer).memory
        assert memory is not None
        if answer.status == "unchanged":
            memory = _reconfirm_if_due(ports, user_id, memory)
        return Saved(answer.status, memory=memory)


def update_memory(
    ports: Ports,
    caller: Identity,
    memory_id: UUID,
    *,
    content: str | None = None,
    category: str | None = None,
    min_position: int | None = None,
) -> Saved:
    """Correct content and/or category at the memory's current revision."""
    check_values(None, content, category, caller.workspace)
    with allowed(ports, caller, "update_core_memory") as workspace:
        reads = fresh_reads(ports, caller.user_id, min_position, AuditLog.name)
        current = visible_memory(ports, reads, caller.user_id, workspace, memory_id)
        outcome = ports.ledger.update_memory(
            caller.user_id,
            memory_id,
            expected_revision=current.revision,
            content=content,
            category=category,
            changed_via="agent_tool",
        )
        memory = ports.wrote(caller.user_id, outcome).memory
        assert memory is not None
        if outcome.status == "updated":
            ports.metrics.corrections.inc()
        return Saved(outcome.status, memory=memory)


def forget_memory(
    ports: Ports, caller: Identity, memory_id: UUID, *, min_position: int | None = None
) -> Saved:
    """Forget irrecoverably: the tombstone is appended and the memory's key destroyed."""
    with allowed(ports, caller, "forget_core_memory") as workspace:
        reads = fresh_reads(ports, caller.user_id, min_position, AuditLog.name)
        visible_memory(ports, reads, caller.user_id, workspace, memory_id)
        ports.wrote(caller.user_id, ports.ledger.forget_memory(caller.user_id, memory_id))
        return Saved("forgotten")


def propose_memory(
    ports: Ports, caller: Identity, proposal: Proposal, *, min_position: int | None = None
) -> Saved:
    """Inferred information becomes a candidate (a replace candidate when the key is taken)."""
    p = proposal
    key, content, category = check_values(p.memory_key, p.content, p.category, caller.workspace)
    with allowed(ports, caller, "propose_core_memory") as workspace:
        user_id, scope = caller.user_id, policy.tool_scope(p.scope_type, workspace)
        reads = fresh_reads(ports, user_id, min_position, ActiveMemories.name)
        existing = reads.memory_by_key(user_id, scope, key)
        visible = existing is not None and sees(ports, workspace, existing)
        # Never compared with a hidden one: that would confirm a guess about it.
        if visible and existing is not None and _same(existing, content, category):
            ports.wrote(user_id, Outcome("duplicate"))  # nothing appended: X-Position, head
            return Saved("duplicate")  # already remembered: nothing to propose
        outcome = ports.ledger.propose_candidate(
            user_id,
            operation="create" if existing is None else "replace",
            scope=scope,
            memory_key=p.memory_key,
            content=p.content,
            category=p.category,
            target_memory_id=None if existing is None else existing.memory_id,
            source_conversation_id=p.source_conversation_id,
        )
        ports.wrote(user_id, outcome)
        shown = outcome.candidate
        return Saved(
            outcome.status,
            candidate=agent_candidate(shown, target_visible=visible) if shown else None,
        )


def _propose_replacement(
    ports: Ports, workspace: str, user_id: str, scope: Scope, p: Proposal, target: UUID
) -> Saved:
    current = ports.ledger.get_memory(user_id, target)  # forgotten since: MemoryForgotten
    visible = sees(ports, workspace, current)
    outcome = ports.ledger.propose_candidate(
        user_id,
        operation="replace",
        scope=scope,
        memory_key=p.memory_key,
        content=p.content,
        category=p.category,
        target_memory_id=target,
    )
    ports.wrote(user_id, outcome)
    if outcome.candidate is None:
        # The user rejected this very replacement recently: the old value stays, unchanged
        # (and is shown only to an agent that may see it).
        return Saved("unchanged", memory=current if visible else None)
    # A pending candidate for the same change is the answer to a repeated save, too. About a
    # hidden memory, the agent sees it as a new-memory proposal (service/visibility.py).
    return Saved(
        "candidate_created", candidate=agent_candidate(outcome.candidate, target_visible=visible)
    )


def _reconfirm_if_due(ports: Ports, user_id: str, memory: MemoryState) -> MemoryState:
    """Saving the same content again confirms it, when it was due for review (section 9.3)."""
    now = ports.ledger.clock()
    if memory.status != "active" or not due_for_review(
        memory.review_after, memory.last_confirmed_at, now
    ):
        return memory
    try:
        outcome = ports.ledger.confirm_memory(user_id, memory.memory_id)
    except MemoryForgotten:
        return memory  # forgotten since this save found it: the save came first
    return ports.wrote(user_id, outcome).memory or memory


def _same(row: MemoryRow, content: str, category: str) -> bool:
    return row.category == category and normalise_content(row.content) == normalise_content(content)
