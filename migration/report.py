"""The import report: a JSON lines file beside the legacy file, and the summary on stdout.

Report file lines (one JSON object each, in this order):

    {"type": "run", "source", "backup", "backup_sha256", "dry_run", "started_at", "finished_at",
     "seconds", "rows_per_second", "workers"}
    {"type": "skipped", "legacy_id", "user_name", "user_id", "memory_key", "reason", "detail"}
        one per row that did not become a memory, in legacy id order; `memory_key` is null
        when the key itself holds a secret; no line ever holds content
    {"type": "user", "user_name", "user_id", "legacy_rows", "imported", "unchanged",
     "skipped": {reason: n}, "ledger_before", "ledger", "adds_up", "problems"}
        one per legacy user_name, sorted
    {"type": "summary", "legacy_rows", "imported", "unchanged", "skipped": {reason: n},
     "ledger", "users", "users_not_adding_up", "adds_up"}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from migration.importer import ImportResult, UserTally
from migration.legacy import Backup

__all__ = ["RunInfo", "default_report_path", "print_summary", "report_lines", "write_report"]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Where the run read from, what it backed up, and how long it took."""

    source: Path
    backup: Backup | None
    started_at: datetime
    finished_at: datetime
    seconds: float
    workers: int

    def rows_per_second(self, rows: int) -> float:
        """Legacy rows handled per second of the whole run."""
        return rows / self.seconds if self.seconds > 0 else 0.0


def default_report_path(source: Path, started_at: datetime, *, dry_run: bool) -> Path:
    """`<file>.import-<UTC time>[.dry-run].jsonl` beside the legacy file."""
    stamp = started_at.strftime("%Y%m%dT%H%M%S%fZ")
    return source.with_name(f"{source.name}.import-{stamp}{'.dry-run' if dry_run else ''}.jsonl")


def report_lines(result: ImportResult, info: RunInfo) -> Iterator[dict[str, Any]]:
    """Every line of the report file, as dicts."""
    totals = result.totals()
    yield {
        "type": "run",
        "source": str(info.source),
        "backup": str(info.backup.path) if info.backup else None,
        "backup_sha256": info.backup.sha256 if info.backup else None,
        "dry_run": result.dry_run,
        "started_at": info.started_at.isoformat(),
        "finished_at": info.finished_at.isoformat(),
        "seconds": round(info.seconds, 3),
        "rows_per_second": round(info.rows_per_second(totals.get("legacy_rows", 0)), 1),
        "workers": info.workers,
    }
    for item, skip in result.skipped:
        yield {
            "type": "skipped",
            "legacy_id": item.row.legacy_id,
            "user_name": item.row.user_name if isinstance(item.row.user_name, str) else None,
            "user_id": item.user_id,
            "memory_key": item.key_shown,
            "reason": skip.reason,
            "detail": skip.detail,
        }
    for user in result.users:
        yield _user_line(user)
    yield {
        "type": "summary",
        **{name: totals.get(name, 0) for name in ("legacy_rows", "imported", "unchanged")},
        "skipped": dict(sorted(result.skipped_by_reason().items())),
        "ledger": totals.get("ledger", 0),
        "users": len(result.users),
        "users_not_adding_up": sum(bool(user.problems()) for user in result.users),
        "adds_up": result.adds_up,
    }


def _user_line(user: UserTally) -> dict[str, Any]:
    problems = user.problems()
    return {
        "type": "user",
        "user_name": user.user_name,
        "user_id": user.user_id,
        "legacy_rows": user.legacy_rows,
        "imported": user.imported,
        "unchanged": user.unchanged,
        "skipped": dict(sorted(user.skipped.items())),
        "ledger_before": user.ledger_before,
        "ledger": user.ledger,
        "adds_up": not problems,
        "problems": problems,
    }


def write_report(path: Path, result: ImportResult, info: RunInfo) -> None:
    """Write the report file (owner-only: it names users and keys)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        for line in report_lines(result, info):
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")


def print_summary(out: TextIO, result: ImportResult, info: RunInfo, report: Path) -> None:
    """The human summary: counts per user, totals, skipped by reason, verdict and speed."""
    write = out.write
    if result.dry_run:
        write("DRY RUN: nothing was written to the ledger; 'imported' means would be imported\n")
    write(
        f"{'user_name':<24} {'user_id':<28} {'legacy':>6} {'imported':>8} {'unchanged':>9}"
        f" {'skipped':>7} {'ledger':>6}  skipped by reason\n"
    )
    for user in result.users:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(user.skipped.items())) or "-"
        ledger = "-" if user.ledger is None else str(user.ledger)
        flag = "" if not user.problems() else "  DOES NOT ADD UP: " + "; ".join(user.problems())
        write(
            f"{_cut(user.user_name, 24):<24} {_cut(user.user_id or '(unmapped)', 28):<28}"
            f" {user.legacy_rows:>6} {user.imported:>8} {user.unchanged:>9}"
            f" {user.skipped_total:>7} {ledger:>6}  {reasons}{flag}\n"
        )
    totals = result.totals()
    write(
        f"{'TOTAL':<24} {f'{len(result.users)} users':<28} {totals.get('legacy_rows', 0):>6}"
        f" {totals.get('imported', 0):>8} {totals.get('unchanged', 0):>9}"
        f" {totals.get('skipped', 0):>7} {totals.get('ledger', 0):>6}\n"
    )
    by_reason = result.skipped_by_reason()
    if by_reason:
        write("skipped by reason: ")
        write(", ".join(f"{k} {v}" for k, v in sorted(by_reason.items())) + "\n")
    rows = totals.get("legacy_rows", 0)
    write(
        f"{rows} rows in {info.seconds:.1f}s ({info.rows_per_second(rows):,.0f} rows/s,"
        f" {info.workers} workers)\n"
    )
    if info.backup is not None:
        write(f"backup: {info.backup.path} (sha256 {info.backup.sha256})\n")
    write(f"report: {report}\n")
    not_adding = [user for user in result.users if user.problems()]
    if not_adding:
        write(f"COUNTS DO NOT ADD UP for {len(not_adding)} user(s); see above and the report\n")
    elif result.failed:
        write(f"{result.failed} rows failed on ledger errors; run the same command again\n")
    else:
        write("all counts add up\n")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"
