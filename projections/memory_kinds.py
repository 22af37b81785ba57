"""How the memory projections tell a memory's events apart: one table, one cache.

active_memories, search_terms, profile and embeddings all branch on the same lifecycle of a
Memory; `MEMORY_KINDS` maps an event class to its kind once per class (`EventKinds`), and
every other event (a candidate's, settings, access records, an unreadable one) is `OTHER`.
"""

from __future__ import annotations

from typing import Final

from domain.model.memory import Memory
from projections.envelope import EventKinds

__all__ = [
    "CONFIRMED",
    "CONTENT",
    "CREATED",
    "FORGOTTEN",
    "MEMORY_KINDS",
    "OTHER",
    "RESTORED",
    "SCHEDULE",
    "SUPPRESSED",
]

CREATED, CONTENT, CONFIRMED, SUPPRESSED, RESTORED, SCHEDULE, FORGOTTEN, OTHER = range(8)

MEMORY_KINDS: Final = EventKinds(
    (
        (Memory.Created, CREATED),
        (Memory.ContentChanged, CONTENT),
        (Memory.Confirmed, CONFIRMED),
        (Memory.Suppressed, SUPPRESSED),
        (Memory.Restored, RESTORED),
        (Memory.ScheduleChanged, SCHEDULE),
        (Memory.Forgotten, FORGOTTEN),
    ),
    OTHER,
)
"""Memory events by kind; a future Memory event class this table lacks is OTHER too."""
