"""The user's own memories (the management API): create, edit, suppress, restore, forget,
and read them, one page, one memory or its versions.

Each write returns the command's `Outcome` once its position is noted for the user's next
reads (`Ports.wrote`); each read waits for the read models it uses, then records for audit
which memories it returned (`memory.read`, section 17).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.errors import MemoryForgotten, NotFound
from domain.ledger.results import MemoryRow, Outcome
from domain.model.values import UNSET, Scope
from projections.reads import Reads
from projections.rows import VersionRow
from projections.views.active_memories import ActiveMemories, Page, PageQuery
from projections.views.memory_versions import MemoryVersions
from projections.views.tombstones import Tombstones
from service.caller import Identity
from service.ports import Ports
from service.reading import fresh_reads

__all__ = [
    "Draft",
    "Edit",
    "create",
    "edit",
    "forget",
    "get",
    "page",
    "restore",
    "restore_version",
    "suppress",
    "versions",
]


@dataclass(frozen=True, slots=True)
class Draft:
    """A memory the user creates: key, content, category, scope, and optional dates."""

    memory_key: str
    content: str
    category: str
    scope: Scope
    review_after: datetime | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """A change at `expected_revision`: content or category (a correction), or the dates
    (UNSET: left as they are; None: cleared)."""

    expected_revision: int
    content: str | None = None
    category: str | None = None
    review_after: Any = UNSET
    expires_at: Any = UNSET


def create(ports: Ports, caller: Identity, draft: Draft) -> Outcome:
    """Create an explicit memory; the same key and content again is `unchanged`."""
    outcome = ports.ledger.create_memory(
        caller.user_id,
        scope=draft.scope,
        memory_key=draft.memory_key,
        content=draft.content,
        category=draft.category,
        review_after=draft.review_after,
        expires_at=draft.expires_at,
    )
    return ports.wrote(caller.user_id, outcome)


def edit(ports: Ports, caller: Identity, memory_id: UUID, change: Edit) -> Outcome:
    """Correct content or category (revision + 1) or reschedule, at the expected revision."""
    outcome = ports.ledger.update_memory(
        caller.user_id,
        memory_id,
        expected_revision=change.expected_revision,
        content=change.content,
        category=change.category,
        review_after=change.review_after,
        expires_at=change.expires_at,
    )
    ports.wrote(caller.user_id, outcome)
    if outcome.status == "updated" and (change.content is not None or change.category is not None):
        ports.metrics.corrections.inc()
    return outcome


def forget(ports: Ports, caller: Identity, memory_id: UUID) -> Outcome:
    """Forget irrecoverably: content, versions, candidates, profile and index are shredded."""
    return ports.wrote(caller.user_id, ports.ledger.forget_memory(caller.user_id, memory_id))


def suppress(ports: Ports, caller: Identity, memory_id: UUID) -> Outcome:
    """Exclude from retrieval until restored (revision unchanged)."""
    return ports.wrote(caller.user_id, ports.ledger.suppress_memory(caller.user_id, memory_id))


def restore(ports: Ports, caller: Identity, memory_id: UUID) -> Outcome:
    """Bring a suppressed memory back (revision unchanged)."""
    return ports.wrote(caller.user_id, ports.ledger.restore_memory(caller.user_id, memory_id))


def restore_version(
    ports: Ports, caller: Identity, memory_id: UUID, revision: int, expected_revision: int
) -> Outcome:
    """That version's content becomes a new revision."""
    outcome = ports.ledger.restore_version(
        caller.user_id, memory_id, revision=revision, expected_revision=expected_revision
    )
    return ports.wrote(caller.user_id, outcome)


def page(
    ports: Ports, caller: Identity, query: PageQuery, *, min_position: int | None = None
) -> Page:
    """The user's active and suppressed memories, one page (filtered by `query`)."""
    reads = fresh_reads(ports, caller.user_id, min_position, ActiveMemories.name)
    found = reads.memories(caller.user_id, **query)
    ports.record_read(caller.user_id, "api.list_memories", found.items)
    return found


def get(
    ports: Ports, caller: Identity, memory_id: UUID, *, min_position: int | None = None
) -> MemoryRow:
    """One live memory (MemoryForgotten when forgotten, NotFound when not the user's)."""
    reads = fresh_reads(ports, caller.user_id, min_position, ActiveMemories.name, Tombstones.name)
    row = _live_row(reads, caller.user_id, memory_id)
    ports.record_read(caller.user_id, "api.get_memory", [row])
    return row


def versions(
    ports: Ports, caller: Identity, memory_id: UUID, *, min_position: int | None = None
) -> list[VersionRow]:
    """Every content version of a live memory, ascending revision."""
    reads = fresh_reads(
        ports,
        caller.user_id,
        min_position,
        ActiveMemories.name,
        Tombstones.name,
        MemoryVersions.name,
    )
    row = _live_row(reads, caller.user_id, memory_id)
    rows = reads.versions(caller.user_id, memory_id)
    ports.record_read(caller.user_id, "api.list_versions", [row])
    return rows


def _live_row(reads: Reads, user_id: str, memory_id: UUID) -> MemoryRow:
    row = reads.memory(user_id, memory_id)
    if row is not None:
        return row
    if reads.is_forgotten(user_id, memory_id):
        raise MemoryForgotten(memory_id)
    raise NotFound(f"memory {memory_id} not found")
