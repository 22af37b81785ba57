"""`memledger import`: re-create an export's memories on this instance.

What it re-creates, under the header's user_id (changed_via = migration):
- every memory with its scope, key, content, category, source_type, status (suppressed stays
  suppressed), review_after and expires_at;
- with history, each version in order as successive updates, so revision numbers and version
  contents match the source (a version equal to the one before it cannot be repeated);
- the source memory id and its original created_at / updated_at, kept as data in `origin`
  (the new memory's own created_at, updated_at and version times are those of the import;
  last_confirmed_at is not re-created);
- pending, unexpired candidates are proposed again (with their target mapped to the new memory);
  accepted candidates stay in the file as a record, their effect is in the memories.
A memory whose expiry has passed is refused by the ledger and reported as `expired`. Importing
the same file again changes nothing (`unchanged`); a run that was interrupted continues where
it stopped; a key that holds other content on this instance is a `conflict`, never overwritten.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.errors import DomainError, InvalidInput, KeyExists
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import MemoryState
from domain.model.values import Scope, normalise_content
from migration.takeout import Export

__all__ = ["ImportSummary", "import_records"]


@dataclass(slots=True)
class ImportSummary:
    """What an import did; `skipped` lists (memory_key, reason, detail) - never content."""

    user_id: str
    memories: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    candidates: Counter[str] = field(default_factory=Counter)

    @property
    def adds_up(self) -> bool:
        """True when every memory line was created, updated or found unchanged."""
        return self.created + self.updated + self.unchanged == self.memories and not self.skipped


def import_records(ledger: MemoryLedger, export: Export) -> ImportSummary:
    """Re-create the export's memories (and pending candidates) under its user."""
    summary = ImportSummary(export.user_id, memories=len(export.memories))
    id_map: dict[str, tuple[UUID, int]] = {}  # source memory id -> (new id, source revision)
    now = ledger.clock()
    for record in export.memories:
        key = str(record.get("memory_key", ""))
        try:
            status, view = _import_memory(ledger, export.user_id, record, now)
        except _Skipped as skip:
            summary.skipped.append((key, skip.reason, skip.detail))
            continue
        setattr(summary, status, getattr(summary, status) + 1)
        id_map[record["memory_id"]] = (view.memory_id, record["revision"])
    for record in export.candidates:
        summary.candidates[_import_candidate(ledger, export.user_id, record, id_map, now)] += 1
    return summary


class _Skipped(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def _import_memory(
    ledger: MemoryLedger, user_id: str, record: dict[str, Any], now: datetime
) -> tuple[str, MemoryState]:
    """Create (or complete) one memory; returns created/updated/unchanged and its view."""
    try:
        scope = Scope(record["scope_type"], record.get("workspace_type"))
        wanted = _wanted_versions(record)
        review_after = _parse_time(record.get("review_after"))
        expires_at = _parse_time(record.get("expires_at"))
        status = record["status"]
        if status not in ("active", "suppressed"):
            raise _Skipped("invalid", f"status {status!r}")
        key, source_type = record["memory_key"], record.get("source_type", "explicit")
        if not isinstance(record["memory_id"], str) or not isinstance(record["revision"], int):
            raise ValueError("memory_id must be text and revision a number")
        origin = _origin(record)
    except (KeyError, TypeError, ValueError, InvalidInput) as error:
        raise _Skipped("invalid", f"malformed memory line ({error})") from None
    if expires_at is not None and expires_at <= now:
        raise _Skipped("expired", "its expiry has passed; the ledger refuses expired memories")
    first_content, first_category = wanted[0]
    try:
        try:
            outcome = ledger.create_memory(
                user_id,
                scope=scope,
                memory_key=key,
                content=first_content,
                category=first_category,
                source_type=source_type,
                changed_via="migration",
                review_after=review_after,
                expires_at=expires_at,
                origin=origin,
            )
            created, view = outcome.status == "created", outcome.memory
        except KeyExists as error:
            created, view = False, ledger.get_memory(user_id, error.memory_id)
        assert view is not None
        changed, view = _complete(ledger, user_id, view, wanted, record, review_after, expires_at)
    except DomainError as error:  # refused by the ledger (a secret, a rule, unavailable)
        raise _Skipped("refused", str(error)[:200]) from None
    if created:
        return "created", view
    return ("updated" if changed else "unchanged"), view


def _complete(
    ledger: MemoryLedger,
    user_id: str,
    view: MemoryState,
    wanted: list[tuple[str, str]],
    record: dict[str, Any],
    review_after: datetime | None,
    expires_at: datetime | None,
) -> tuple[bool, MemoryState]:
    """Bring a memory to the exported versions, schedule and status; (changed?, view)."""
    have = _compress([(v.content, v.category) for v in view.versions])
    if "versions" in record:
        if len(have) > len(wanted) or any(
            not _same(a, b) for a, b in zip(have, wanted, strict=False)
        ):
            raise _Skipped("conflict", "this key holds another history on this instance")
        missing = wanted[len(have) :]
    elif normalise_content(have[-1][0]) == normalise_content(wanted[-1][0]):
        missing = [] if have[-1][1] == wanted[-1][1] else [wanted[-1]]
    else:
        raise _Skipped("conflict", "this key holds other content on this instance")
    changed = False
    for content, category in missing:
        view, updated = _update(ledger, user_id, view, content=content, category=category)
        changed = changed or updated
    if (view.review_after, view.expires_at) != (review_after, expires_at):
        view, _ = _update(ledger, user_id, view, review_after=review_after, expires_at=expires_at)
        changed = True
    if record["status"] != view.status:
        command = (
            ledger.suppress_memory if record["status"] == "suppressed" else ledger.restore_memory
        )
        outcome = command(user_id, view.memory_id)
        assert outcome.memory is not None
        view, changed = outcome.memory, True
    return changed, view


def _update(
    ledger: MemoryLedger, user_id: str, view: MemoryState, **changes: Any
) -> tuple[MemoryState, bool]:
    """Change the memory `view` shows, at its revision, as a migration: (new view, changed?)."""
    outcome = ledger.update_memory(
        user_id,
        view.memory_id,
        expected_revision=view.revision,
        changed_via="migration",
        **changes,
    )
    assert outcome.memory is not None
    return outcome.memory, outcome.status != "unchanged"


def _wanted_versions(record: dict[str, Any]) -> list[tuple[str, str]]:
    current = (str(record["content"]), str(record["category"]))
    if "versions" not in record:
        return [current]
    versions = sorted(record["versions"], key=lambda v: int(v["revision"]))
    wanted = _compress([(str(v["content"]), str(v["category"])) for v in versions])
    if not wanted or not _same(wanted[-1], current):
        raise ValueError("the last version is not the memory's content")
    return wanted


def _compress(versions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop versions equal to the one before (the ledger does not repeat an unchanged one)."""
    kept: list[tuple[str, str]] = []
    for version in versions:
        if not kept or not _same(kept[-1], version):
            kept.append(version)
    return kept


def _same(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return normalise_content(a[0]) == normalise_content(b[0]) and a[1] == b[1]


def _origin(record: dict[str, Any]) -> dict[str, str]:
    given = record.get("origin")
    source: dict[str, Any] = given if isinstance(given, dict) else {}
    origin = {
        "system": "memledger-export",
        "source_memory_id": str(record["memory_id"]),
        "created_at": str(source.get("created_at") or record.get("created_at") or ""),
        "updated_at": str(record.get("updated_at") or ""),
    }
    for name in ("system", "legacy_id"):
        if isinstance(source.get(name), str):
            origin[f"source_{name}"] = source[name][:200]
    return {k: v for k, v in origin.items() if v}


def _import_candidate(
    ledger: MemoryLedger,
    user_id: str,
    record: dict[str, Any],
    id_map: dict[str, tuple[UUID, int]],
    now: datetime,
) -> str:
    """Propose a pending candidate again; returns what happened (a summary key)."""
    if record.get("status") != "pending":
        return "not_recreated_decided"
    try:
        expires_at = _parse_time(record.get("expires_at"))
        if expires_at is not None and expires_at <= now:
            return "skipped_expired"
        target_id = None
        if record.get("target_memory_id"):
            target = id_map.get(str(record["target_memory_id"]))
            if target is None:
                return "skipped_target_not_imported"
            if record.get("expected_revision") != target[1]:
                return "skipped_stale"
            target_id = target[0]
        outcome = ledger.propose_candidate(
            user_id,
            operation=record["operation"],
            scope=Scope(record["proposed_scope_type"], record.get("proposed_workspace_type")),
            memory_key=record["proposed_key"],
            content=record["proposed_content"],
            category=record["proposed_category"],
            target_memory_id=target_id,
            source_conversation_id=record.get("source_conversation_id"),
        )
    except (KeyError, TypeError, ValueError, DomainError):
        return "skipped_refused"
    return {"candidate_created": "proposed", "duplicate": "unchanged"}.get(
        outcome.status, f"skipped_{outcome.status}"
    )


def _parse_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a time")
    at = datetime.fromisoformat(value)
    if at.tzinfo is None:
        raise ValueError(f"{value!r} has no offset")
    return at
