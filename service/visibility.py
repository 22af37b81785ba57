"""What an agent may see, and how a memory it may not see is kept out of every tool answer.

An agent in workspace W sees the active, unexpired memories in `global` and `workspace:W`.
Hidden means indistinguishable in what an agent reads: a tool answer about a memory the agent
may not see (suppressed, expired, in another workspace, another user's) carries none of that
memory's id, revision, content or state, and a call by id on it answers exactly what a call on
another user's memory answers (404 `not found`).

A save or a proposal under the key of a hidden memory still never overwrites or duplicates
it: the ledger records a `replace` candidate targeting it, so the user decides in the
management API, where they see the candidate as it is. The agent is shown that candidate as
it would see any new-memory proposal (`agent_candidate`): operation `create`, no target, no
expected revision — what `propose_core_memory` answers for a free key. From the agent's side
that is what it is: a proposal the user has to accept before anything is remembered.

The residual signal (docs/mcp.md, "What an agent cannot see"): a *save* on a free key answers
`created`, on a key held by a hidden memory `candidate_created` (or `unchanged`, without a
memory, once the user rejected that very value) — so an agent can tell that such a key is not
free, never which memory holds it, whether it is suppressed or expired, or what it says.
"""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from domain import policy
from domain.errors import MemoryForgotten, NotFound
from domain.ledger.results import CandidateState, MemoryRow, MemoryState
from projections.reads import Reads
from service.ports import Ports

__all__ = ["agent_candidate", "sees", "visible_memory"]


def visible_memory(
    ports: Ports, reads: Reads, user_id: str, workspace: str, memory_id: UUID
) -> MemoryState:
    """The memory if this agent may see it; else NotFound as for another user's
    (MemoryForgotten if it was forgotten in a scope the agent may see)."""
    gone = reads.forgotten_scope(user_id, memory_id)
    if gone is not None:
        if policy.is_visible(gone.scope_type, gone.workspace_type, workspace):
            raise MemoryForgotten(memory_id)
        raise NotFound(f"memory {memory_id} not found")
    memory = ports.ledger.get_memory(user_id, memory_id)
    if not sees(ports, workspace, memory):
        raise NotFound(f"memory {memory_id} not found")
    return memory


def sees(ports: Ports, workspace: str, memory: MemoryRow) -> bool:
    """True when an agent in `workspace` may see this memory (a read-model row or a command's
    `MemoryState`): active, unexpired, in scope."""
    return policy.is_visible(
        memory.scope_type, memory.workspace_type, workspace
    ) and memory.is_retrievable(ports.ledger.clock())


def agent_candidate(candidate: CandidateState, *, target_visible: bool) -> CandidateState:
    """The candidate as an agent is shown it: a proposal about a memory the agent may not see
    reads like a new-memory proposal (no operation, target or revision of that memory)."""
    if target_visible or candidate.target_memory_id is None:
        return candidate
    return replace(candidate, operation="create", target_memory_id=None, expected_revision=None)
