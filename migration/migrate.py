"""`memledger migrate legacy` as a function: check, back up, plan, import, report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TextIO

from domain.ledger.ledger import MemoryLedger
from migration.importer import ImportResult, run_import
from migration.legacy import make_backup, read_legacy
from migration.plan import DEFAULT_CATEGORY_MAP, load_user_map, plan_rows
from migration.progress import RowProgress
from migration.report import RunInfo, default_report_path, print_summary, write_report

__all__ = ["LegacyRun", "migrate_legacy"]


@dataclass(frozen=True, slots=True)
class LegacyRun:
    """What a run did: its result, timings and backup, and where the report went."""

    result: ImportResult
    info: RunInfo
    report: Path

    @property
    def exit_code(self) -> int:
        """0 all added up; 1 counts do not add up; 3 rows failed on ledger errors (re-run)."""
        if not self.result.adds_up:
            return 1
        return 3 if self.result.failed else 0


def migrate_legacy(
    ledger: MemoryLedger,
    sqlite: Path,
    users: Path,
    *,
    dry_run: bool = False,
    workers: int = 4,
    category_map: dict[str, str] | None = None,
    naive_tz: tzinfo = UTC,
    report: Path | None = None,
    out: TextIO | None = None,
    log: TextIO | None = None,
    tty: bool | None = None,
) -> LegacyRun:
    """Import a legacy CoreMemory file (see the migration package for the whole contract).

    Raises LegacyFormatError / UserMapError before anything is written. Unless `dry_run`, a
    backup is made beside the file first and the rows are read from that backup.
    """
    out, log = out or sys.stdout, log or sys.stderr
    started, began = datetime.now(UTC), time.perf_counter()
    rows = read_legacy(sqlite)  # checks the shape: nothing is written for a wrong file
    mapping = load_user_map(users)
    backup = None
    if not dry_run:
        backup = make_backup(sqlite, now=started)
        _say(log, f"backup of {sqlite} written to {backup.path} (sha256 {backup.sha256})")
        rows = read_legacy(backup.path)  # import exactly what was backed up
    planned = plan_rows(
        rows, mapping, category_map=category_map or DEFAULT_CATEGORY_MAP, naive_tz=naive_tz
    )
    report_path = report or default_report_path(sqlite, started, dry_run=dry_run)
    with RowProgress(len(planned), "importing legacy rows", stream=log, tty=tty) as progress:
        result = run_import(
            ledger, planned, workers=workers, dry_run=dry_run, progress=progress.advance
        )
    info = RunInfo(sqlite, backup, started, datetime.now(UTC), time.perf_counter() - began, workers)
    write_report(report_path, result, info)
    print_summary(out, result, info, report_path)
    return LegacyRun(result, info, report_path)


def _say(log: TextIO, message: str) -> None:
    log.write(f"memledger: {message}\n")
    log.flush()
