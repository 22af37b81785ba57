"""`memledger migrate legacy`, `memledger export` and `memledger import`: glue over `migration`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn, TextIO

import typer

from api.cli.common import (
    EXIT_NOT_DONE,
    EXIT_OK,
    complete_shredding,
    fail,
    load_settings,
    open_ledger,
    require_user,
)

__all__ = ["export_command", "import_command", "migrate_app"]

migrate_app = typer.Typer(
    no_args_is_help=True, help="Move existing users onto the ledger (see the migration package)."
)


@migrate_app.callback()
def migrate() -> None:
    """Move existing users onto the ledger."""


@migrate_app.command("legacy")
def migrate_legacy_command(
    sqlite: Annotated[Path, typer.Option(help="the legacy CoreMemory SQLite file")],
    users: Annotated[
        Path, typer.Option(help="user_name -> user_id map: JSON object or CSV user_name,user_id")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="do everything but write; print the same report")
    ] = False,
    workers: Annotated[int, typer.Option(min=1, max=32, help="users imported at once")] = 4,
    map_category: Annotated[
        list[str] | None,
        typer.Option(help="map a legacy category, e.g. hobby=preference (repeatable)"),
    ] = None,
    naive_timezone: Annotated[
        str, typer.Option(help="time zone of legacy timestamps without an offset")
    ] = "UTC",
    report: Annotated[
        Path | None, typer.Option(help="report file (default: beside the SQLite file)")
    ] = None,
) -> None:
    """Import a legacy CoreMemory SQLite file: every row a global memory of its mapped user.

    Backs the file up beside itself first. Re-running is idempotent and resumes a run that was
    interrupted. Exit status: 0 counts add up, 1 they do not, 2 bad input, 3 rows failed on
    ledger errors (run again).
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from migration.legacy import LegacyFormatError
    from migration.migrate import migrate_legacy
    from migration.plan import UserMapError, parse_category_map

    try:
        categories = parse_category_map(map_category or [])
        zone = ZoneInfo(naive_timezone)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="'--map-category'") from None
    except ZoneInfoNotFoundError:
        raise typer.BadParameter(
            f"unknown time zone {naive_timezone!r}", param_hint="'--naive-timezone'"
        ) from None
    with open_ledger("memledger") as ledger:
        try:
            run = migrate_legacy(
                ledger,
                sqlite,
                users,
                dry_run=dry_run,
                workers=workers,
                category_map=categories,
                naive_tz=zone,
                report=report,
            )
        except (LegacyFormatError, UserMapError, OSError) as error:
            _fail(f"migrate legacy: {error}")
    raise typer.Exit(run.exit_code)


@migrate_app.command("partitions")
def migrate_partitions_command() -> None:
    """Partition a ledger written before partitions: its events placed in their users'
    partitions (in their old order), the projections' positions translated, in their
    tracking and in their rows (nothing is projected again).

    Every start of this release does the same on its own; this runs it alone and says what
    it did. Running it again does nothing.
    """
    from api.bootstrap import build_pool, resolve_database_url
    from projections.registry import all_projections
    from projections.startup import ensure_tables

    settings = load_settings()
    with open_ledger("memledger migrate partitions:") as ledger:
        placed = ledger.upgraded
        pool = build_pool(settings, resolve_database_url(settings))
        try:
            again = ensure_tables(
                pool,
                settings.db_schema,
                all_projections(),
                lock_timeout=settings.lock_timeout,
                partition_of=ledger.partition,
            )
        finally:
            pool.close()
    if placed:
        typer.echo(f"{placed} events placed in their users' partitions")
    else:
        typer.echo("no event without a partition: the ledger is partitioned")
    if again:
        typer.echo(f"positions translated, in the tracking and the rows of: {', '.join(again)}")


def export_command(
    user: Annotated[str, typer.Option(help="the user_id whose memories to export")],
    include_history: Annotated[
        bool, typer.Option("--include-history", help="add version history and candidates")
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="write here (owner-only) instead of stdout")
    ] = None,
) -> None:
    """Write a user's live memories as JSON lines (forgotten ones are never exported).

    Exit status: 0 written, 4 the ledger has nothing of that user (nothing written).
    """
    from migration.takeout import export_user

    with open_ledger("memledger") as ledger:
        require_user(ledger, user)  # a user the ledger lacks: exit status 4, nothing written
        complete_shredding(ledger)
        lines = list(export_user(ledger, user, include_history=include_history))
    with _open_output(output) as out:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    count = lines[0]["memories"]
    typer.echo(f"memledger: exported {count} memories of {user}", err=True)


def import_command(
    file: Annotated[Path, typer.Option(help="a file written by `memledger export` (- : stdin)")],
    user: Annotated[
        str | None, typer.Option(help="refuse the file unless it holds this user's memories")
    ] = None,
) -> None:
    """Re-create an export's memories under the same user (idempotent; resumes).

    Exit status: 0 every memory is there, 1 some were skipped (listed), 2 bad file.
    """
    from migration.restore import import_records
    from migration.takeout import TakeoutFormatError, parse_export

    try:
        if str(file) == "-":
            export = parse_export(sys.stdin)
        else:
            with file.open(encoding="utf-8") as handle:
                export = parse_export(handle)
    except (OSError, UnicodeDecodeError, TakeoutFormatError) as error:
        _fail(f"import: {file}: {error}")
    if user is not None and user != export.user_id:
        _fail(f"import: the file holds the memories of {export.user_id!r}, not {user!r}")
    with open_ledger("memledger") as ledger:
        summary = import_records(ledger, export)
    typer.echo(
        f"user {summary.user_id}: {summary.memories} memories in the file, {summary.created}"
        f" created, {summary.updated} updated, {summary.unchanged} unchanged,"
        f" {len(summary.skipped)} skipped"
    )
    for key, reason, detail in summary.skipped:
        typer.echo(f"  skipped {key!r}: {reason} ({detail})")
    if summary.candidates:
        typer.echo(
            "candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.candidates.items()))
        )
    raise typer.Exit(EXIT_OK if summary.adds_up else EXIT_NOT_DONE)


@contextmanager
def _open_output(path: Path | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yield handle


def _fail(message: str) -> NoReturn:
    fail(f"memledger {message}")
