"""Running a planned legacy import against the ledger: per user, in a few threads, resumable.

Every planned row becomes a global memory (changed_via = migration, origin = its legacy id and
timestamps) through `MemoryLedger.create_memory`, whose key claim makes a second run of the
same import idempotent: a memory that is already there is `unchanged`, a key that holds other
content is a `conflict` and is never overwritten. So an interrupted run is resumed by running
the same command again, and ends in the state an uninterrupted run would have reached.

Counts per legacy user (what `UserTally` holds and the report prints):

    legacy_rows    rows of that user_name in the file
    imported       memories created by this run (dry run: that would be created)
    unchanged      already in the ledger with the same content (an earlier or killed run)
    skipped        rows that did not become a memory, by reason (see migration.plan)
    ledger_before  the user's live memories (all scopes) before this run touched the user
    ledger         the user's live memories after it (dry run: before + imported)

They add up when legacy_rows = imported + unchanged + skipped, ledger = ledger_before +
imported, and ledger >= imported + unchanged. Anything else (e.g. a memory forgotten while
the import ran) is reported, and the command exits non-zero.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby

from domain.errors import (
    InvalidInput,
    KeyExists,
    LedgerUnavailable,
    MemoryForgotten,
    NotFound,
    SensitiveContent,
)
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope, normalise_content
from migration.plan import PlannedRow, Skip

__all__ = ["ImportResult", "UserTally", "run_import"]


@dataclass(slots=True)
class UserTally:
    """The counts of one legacy user (see the module docstring)."""

    user_name: str
    user_id: str | None
    legacy_rows: int = 0
    imported: int = 0
    unchanged: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    ledger_before: int | None = None
    ledger: int | None = None

    @property
    def skipped_total(self) -> int:
        """Rows of this user that did not become a memory."""
        return sum(self.skipped.values())

    def problems(self) -> list[str]:
        """Why the counts do not add up (empty when they do)."""
        found = []
        accounted = self.imported + self.unchanged + self.skipped_total
        if accounted != self.legacy_rows:
            found.append(f"{self.legacy_rows} legacy rows but {accounted} accounted for")
        if self.ledger is not None and self.ledger_before is not None:
            if self.ledger != self.ledger_before + self.imported:
                found.append(
                    f"ledger holds {self.ledger}, expected {self.ledger_before} before"
                    f" + {self.imported} imported"
                )
            if self.ledger < self.imported + self.unchanged:
                found.append(
                    f"ledger holds {self.ledger}, fewer than {self.imported + self.unchanged}"
                    " imported and unchanged"
                )
        return found


@dataclass(slots=True)
class ImportResult:
    """The outcome of a run: counts per user and every skipped row (in legacy id order)."""

    users: list[UserTally]
    skipped: list[tuple[PlannedRow, Skip]]
    dry_run: bool

    @property
    def adds_up(self) -> bool:
        """True when every user's counts add up."""
        return not any(user.problems() for user in self.users)

    @property
    def failed(self) -> int:
        """Rows the ledger kept refusing for lack of availability (re-run to resume)."""
        return sum(user.skipped["ledger_error"] for user in self.users)

    def totals(self) -> dict[str, int]:
        """Sums over all users."""
        sums: Counter[str] = Counter()
        for user in self.users:
            sums.update(
                legacy_rows=user.legacy_rows,
                imported=user.imported,
                unchanged=user.unchanged,
                skipped=user.skipped_total,
                ledger=user.ledger or 0,
            )
        return dict(sums)

    def skipped_by_reason(self) -> Counter[str]:
        """Skipped rows of all users, by reason."""
        total: Counter[str] = Counter()
        for user in self.users:
            total.update(user.skipped)
        return total


def run_import(
    ledger: MemoryLedger,
    planned: Iterable[PlannedRow],
    *,
    workers: int = 4,
    dry_run: bool = False,
    progress: Callable[[int], None] = lambda n: None,
) -> ImportResult:
    """Import the planned rows, one legacy user per task, `workers` users at a time."""
    by_user = sorted(planned, key=lambda p: (str(p.row.user_name), p.row.legacy_id))
    groups = [list(rows) for _, rows in groupby(by_user, key=lambda p: str(p.row.user_name))]
    lock = threading.Lock()
    skipped: list[tuple[PlannedRow, Skip]] = []

    def one(rows: list[PlannedRow]) -> UserTally:
        tally, skips = _import_user(ledger, rows, dry_run=dry_run, progress=progress)
        with lock:
            skipped.extend(skips)
        return tally

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="migrate") as pool:
        tallies = list(pool.map(one, groups))
    skipped.sort(key=lambda item: item[0].row.legacy_id)
    return ImportResult(tallies, skipped, dry_run)


def _import_user(
    ledger: MemoryLedger,
    rows: list[PlannedRow],
    *,
    dry_run: bool,
    progress: Callable[[int], None],
) -> tuple[UserTally, list[tuple[PlannedRow, Skip]]]:
    user_id = rows[0].user_id
    tally = UserTally(str(rows[0].row.user_name), user_id, legacy_rows=len(rows))
    skips: list[tuple[PlannedRow, Skip]] = []
    existing: dict[str, str] = {}
    if user_id is not None:
        existing, tally.ledger_before = _live_global(ledger, user_id)
    for item in rows:
        skip = item.skip or _save(ledger, item, existing, tally, dry_run)
        if skip is not None:
            tally.skipped[skip.reason] += 1
            skips.append((item, skip))
        progress(1)
    if user_id is not None and tally.ledger_before is not None:
        tally.ledger = (
            tally.ledger_before + tally.imported if dry_run else len(ledger.memory_ids(user_id))
        )
    return tally, skips


def _save(
    ledger: MemoryLedger,
    item: PlannedRow,
    existing: dict[str, str],
    tally: UserTally,
    dry_run: bool,
) -> Skip | None:
    """Create one memory (or see that it is there); a Skip when it cannot be."""
    assert item.user_id is not None
    held = existing.get(item.memory_key)
    if held is not None:  # known before the first write: no need to try
        if normalise_content(held) == normalise_content(item.content):
            tally.unchanged += 1
            return None
        return Skip("conflict", "the ledger holds this global key with other content")
    if dry_run:
        existing[item.memory_key] = item.content
        tally.imported += 1
        return None
    try:
        outcome = ledger.create_memory(
            item.user_id,
            scope=Scope.global_(),
            memory_key=item.memory_key,
            content=item.content,
            category=item.category,
            changed_via="migration",
            origin=item.origin,
        )
    except KeyExists as error:
        return Skip("conflict", f"the ledger holds this global key as memory {error.memory_id}")
    except SensitiveContent as error:  # planning checked this already; kept for safety
        return Skip("secret", f"{error.field}: {error.kind}")
    except InvalidInput as error:
        return Skip("invalid_row", f"{error.field}: {error.message}")
    except LedgerUnavailable as error:
        return Skip("ledger_error", str(error)[:200])
    if outcome.status == "created":
        tally.imported += 1
    else:
        tally.unchanged += 1
    existing[item.memory_key] = item.content
    return None


def _live_global(ledger: MemoryLedger, user_id: str) -> tuple[dict[str, str], int]:
    """The user's live global memories by key, and how many live memories they have at all."""
    ids = ledger.memory_ids(user_id)
    ledger.keys.prefetch(ids)
    found: dict[str, str] = {}
    for memory_id in ids:
        try:
            view = ledger.get_memory(user_id, memory_id)
        except (NotFound, MemoryForgotten):  # forgotten since it was listed
            continue
        if view.scope_type == "global":
            found[view.memory_key] = view.content
    return found, len(ids)
