"""The legacy /me/memories use cases of the Flutter client: global memories, by key."""

from __future__ import annotations

from domain.ledger.results import MemoryRow, MemoryState, Outcome
from domain.model.values import Scope
from projections.views.active_memories import ActiveMemories
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads

__all__ = ["forget_global", "global_memories", "put_global"]


def global_memories(
    ports: Ports, caller: Identity, *, min_position: int | None = None
) -> list[MemoryRow]:
    """Every active global memory of the user, oldest first (all pages)."""
    reads = fresh_reads(ports, caller.user_id, min_position, ActiveMemories.name)
    returned: list[MemoryRow] = []
    cursor = None
    while True:
        page = reads.memories(
            caller.user_id, scope_type="global", status="active", limit=200, cursor=cursor
        )
        returned += page.items
        if page.next_cursor is None:
            ports.record_read(caller.user_id, "api.legacy_list_memories", returned)
            return returned
        cursor = page.next_cursor


def put_global(
    ports: Ports, caller: Identity, memory_key: str, content: str, category: str
) -> MemoryState:
    """Create or replace the global memory with this key."""
    outcome = ports.ledger.put_global_memory(
        caller.user_id, memory_key=memory_key, content=content, category=category
    )
    memory = ports.wrote(caller.user_id, outcome).memory
    assert memory is not None
    return memory


def forget_global(ports: Ports, caller: Identity, memory_key: str) -> Outcome:
    """Forget the global memory with this key (irrecoverably)."""
    outcome = ports.ledger.forget_by_key(caller.user_id, Scope.global_(), memory_key)
    return ports.wrote(caller.user_id, outcome)
