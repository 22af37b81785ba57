"""`memledger export` / `memledger import`: a user's memories as JSON lines, between instances.

Format `memledger-export`, version 1, UTF-8, one JSON object per line:

    {"format": "memledger-export", "version": 1, "user_id", "exported_at",
     "include_history", "memories": n, "candidates": m}                         the header
    {"type": "memory", "memory_id", "scope_type", "workspace_type", "memory_key", "content",
     "category", "source_type", "status", "revision", "created_at", "updated_at",
     "last_confirmed_at", "review_after", "expires_at", "origin",
     "versions": [{"revision", "content", "category", "change_type", "changed_via",
                   "created_at"}, ...]}                      n lines; versions only with history
    {"type": "candidate", "candidate_id", "operation", "target_memory_id", "expected_revision",
     "proposed_scope_type", "proposed_workspace_type", "proposed_key", "proposed_content",
     "proposed_category", "source_conversation_id", "status", "resulting_memory_id",
     "created_at", "decided_at", "expires_at"}     m lines, only with history (pending, accepted)

Times are ISO 8601 with an offset. Forgotten memories (and candidates about them) are never
exported: their keys are shredded, so the ledger cannot read them any more.

What `memledger import` re-creates from it: see migration.restore.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from uuid import UUID

from domain.errors import NotFound
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import CandidateState, MemoryState
from domain.model.memory import Memory

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "Export",
    "TakeoutFormatError",
    "export_user",
    "parse_export",
]

EXPORT_FORMAT: Final = "memledger-export"
EXPORT_VERSION: Final = 1
_DECIDED_KEPT: Final = ("accepted",)


class TakeoutFormatError(Exception):
    """The file is not a complete memledger export this version can read."""


# -- export ----------------------------------------------------------------------------------


def export_user(
    ledger: MemoryLedger, user_id: str, *, include_history: bool = False
) -> Iterator[dict[str, Any]]:
    """The header, then one line per live memory (oldest first), then candidates if asked."""
    memories = _live_memories(ledger, user_id)
    candidates = _candidates(ledger, user_id) if include_history else []
    yield {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "user_id": user_id,
        "exported_at": _time(datetime.now(UTC)),
        "include_history": include_history,
        "memories": len(memories),
        "candidates": len(candidates),
    }
    for memory in memories:
        yield _memory_line(memory, include_history)
    for candidate in candidates:
        yield _candidate_line(candidate)


def _live_memories(ledger: MemoryLedger, user_id: str) -> list[Memory]:
    ids = ledger.memory_ids(user_id)
    ledger.keys.prefetch(ids)
    found = []
    for memory_id in ids:
        memory: object = ledger.repository.get(memory_id)
        if isinstance(memory, Memory) and memory.user_id == user_id and not memory.is_forgotten:
            found.append(memory)
    return sorted(found, key=lambda m: (m.created_on, str(m.id)))


def _candidates(ledger: MemoryLedger, user_id: str) -> list[CandidateState]:
    found = []
    for candidate_id in ledger.keys.owned_keys(user_id, "candidate"):
        try:
            candidate = ledger.get_candidate(user_id, candidate_id)
        except NotFound:
            continue
        if candidate.status == "pending" or candidate.status in _DECIDED_KEPT:
            found.append(candidate)
    return sorted(found, key=lambda c: (c.created_at, str(c.candidate_id)))


def _memory_line(memory: Memory, include_history: bool) -> dict[str, Any]:
    view = MemoryState.of(memory)
    line: dict[str, Any] = {
        "type": "memory",
        "memory_id": str(view.memory_id),
        "scope_type": view.scope_type,
        "workspace_type": view.workspace_type,
        "memory_key": view.memory_key,
        "content": view.content,
        "category": view.category,
        "source_type": view.source_type,
        "status": view.status,
        "revision": view.revision,
        "created_at": _time(view.created_at),
        "updated_at": _time(view.updated_at),
        "last_confirmed_at": _time(view.last_confirmed_at),
        "review_after": _time(view.review_after),
        "expires_at": _time(view.expires_at),
        "origin": memory.origin,
    }
    if include_history:
        line["versions"] = [
            {
                "revision": v.revision,
                "content": v.content,
                "category": v.category,
                "change_type": v.change_type,
                "changed_via": v.changed_via,
                "created_at": _time(v.created_at),
            }
            for v in view.versions
        ]
    return line


def _candidate_line(candidate: CandidateState) -> dict[str, Any]:
    return {
        "type": "candidate",
        "candidate_id": str(candidate.candidate_id),
        "operation": candidate.operation,
        "target_memory_id": _str(candidate.target_memory_id),
        "expected_revision": candidate.expected_revision,
        "proposed_scope_type": candidate.proposed_scope_type,
        "proposed_workspace_type": candidate.proposed_workspace_type,
        "proposed_key": candidate.proposed_key,
        "proposed_content": candidate.proposed_content,
        "proposed_category": candidate.proposed_category,
        "source_conversation_id": candidate.source_conversation_id,
        "status": candidate.status,
        "resulting_memory_id": _str(candidate.resulting_memory_id),
        "created_at": _time(candidate.created_at),
        "decided_at": _time(candidate.decided_at),
        "expires_at": _time(candidate.expires_at),
    }


# -- reading a file --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Export:
    """A parsed export: its header, memory lines and candidate lines."""

    header: dict[str, Any]
    memories: list[dict[str, Any]]
    candidates: list[dict[str, Any]]

    @property
    def user_id(self) -> str:
        """Whose memories these are."""
        return str(self.header["user_id"])


def parse_export(lines: Iterable[str]) -> Export:
    """Read and check a whole export before anything is written (a cut-off file is refused)."""
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = _json_object(line)
        except ValueError as error:
            raise TakeoutFormatError(f"line {number}: {error}") from None
        records.append(record)
    if not records:
        raise TakeoutFormatError("the file is empty")
    header, body = records[0], records[1:]
    if header.get("format") != EXPORT_FORMAT:
        raise TakeoutFormatError(f"line 1: not a {EXPORT_FORMAT} header")
    if header.get("version") != EXPORT_VERSION:
        raise TakeoutFormatError(
            f"format version {header.get('version')!r}; this memledger reads {EXPORT_VERSION}"
        )
    user_id = header.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise TakeoutFormatError("line 1: the header has no user_id")
    memories = [r for r in body if r.get("type") == "memory"]
    candidates = [r for r in body if r.get("type") == "candidate"]
    unknown = len(body) - len(memories) - len(candidates)
    if unknown:
        raise TakeoutFormatError(f"{unknown} lines are neither memories nor candidates")
    expected = (header.get("memories"), header.get("candidates"))
    if expected != (len(memories), len(candidates)):
        raise TakeoutFormatError(
            f"the header announces {expected[0]} memories and {expected[1]} candidates, the"
            f" file holds {len(memories)} and {len(candidates)}: is it cut off?"
        )
    return Export(header, memories, candidates)


def _json_object(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _str(value: UUID | None) -> str | None:
    return None if value is None else str(value)
