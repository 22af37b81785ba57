"""`memledger replay`: the auditor's view of the ledger, as JSON lines on stdout.

Register it on the command line with `app.command("replay")(replay_command)`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

import typer

__all__ = ["parse_time", "replay_command"]

_TIME_HELP = "ISO 8601, e.g. 2025-06-01T12:00:00Z (no offset: UTC)"


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; a time without an offset is UTC."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a time; use {_TIME_HELP}") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def replay_command(
    user: Annotated[str | None, typer.Option(help="only events of this user_id")] = None,
    memory: Annotated[
        str | None,
        typer.Option(help="only events of this memory id (and candidates about it)"),
    ] = None,
    after: Annotated[int, typer.Option(min=0, help="only positions after this one")] = 0,
    until: Annotated[
        int | None, typer.Option(min=0, help="only positions up to this one (inclusive)")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(parser=parse_time, metavar="TIME", help=f"events at or after; {_TIME_HELP}"),
    ] = None,
    before: Annotated[
        datetime | None,
        typer.Option(parser=parse_time, metavar="TIME", help="events strictly before this time"),
    ] = None,
    as_of: Annotated[
        datetime | None,
        typer.Option(
            "--as-of",
            parser=parse_time,
            metavar="TIME",
            help="print the user's memories as they stood at TIME instead (needs --user)",
        ),
    ] = None,
) -> None:
    """Stream ledger events as JSON lines, or reconstruct a user's memories with --as-of.

    Content is decrypted while its data key exists; where the key was destroyed (forgotten
    memories, rejected or expired candidates) the line says "redacted": true instead.
    """
    memory_id = _memory_id(memory)
    if as_of is not None:
        if user is None:
            raise typer.BadParameter("needs --user (whose memories)", param_hint="'--as-of'")
        given = {"--after": after or None, "--until": until, "--since": since, "--before": before}
        mixed = [name for name, value in given.items() if value is not None]
        if mixed:
            hint = "'--as-of'"
            raise typer.BadParameter(f"cannot be combined with {', '.join(mixed)}", param_hint=hint)

    from api.bootstrap import build_ledger
    from api.settings import Settings
    from domain.ledger.keyring import KeyringError
    from projections.replay import ReplayError, replay_events
    from projections.replay import as_of as memories_as_of

    try:
        ledger = build_ledger(Settings())  # type: ignore[call-arg]
    except KeyringError as error:
        typer.echo(f"memledger: {error}", err=True)
        raise typer.Exit(2) from None
    try:
        # Keys that outlived their tombstone (a restored key backup) must not decrypt here.
        shredded = ledger.complete_shredding()
        if shredded:
            typer.echo(
                f"memledger: destroyed {shredded} data keys that outlived a forget", err=True
            )
        if as_of is not None and user is not None:
            found = memories_as_of(ledger, user, as_of)
            _print_lines(m for m in found if memory_id is None or m["memory_id"] == str(memory_id))
        else:
            _print_lines(
                replay_events(
                    ledger,
                    user_id=user,
                    memory_id=memory_id,
                    after=after,
                    until=until,
                    since=since,
                    before=before,
                )
            )
    except ReplayError as error:
        typer.echo(f"memledger: {error}", err=True)
        raise typer.Exit(1) from None
    finally:
        ledger.close()


def _memory_id(memory: str | None) -> UUID | None:
    if memory is None:
        return None
    try:
        return UUID(memory)
    except ValueError:
        raise typer.BadParameter(f"{memory!r} is not a UUID", param_hint="'--memory'") from None


def _print_lines(records: Any) -> None:
    """One JSON object per line; stops quietly when the reader goes away (`| head`)."""
    out = sys.stdout
    try:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
    except BrokenPipeError:
        with contextlib.suppress(Exception):  # no second error when Python flushes at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        raise typer.Exit(0) from None
