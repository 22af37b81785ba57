"""`memledger replay`: the auditor's view of the ledger (the `replay` package), as JSON lines."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import typer

from api.cli.common import (
    EXIT_NOT_DONE,
    EXIT_OK,
    complete_shredding,
    fail,
    open_ledger,
    require_user,
)

__all__ = ["parse_time", "replay_command"]

_TIME_HELP = "ISO 8601, e.g. 2025-06-01T12:00:00Z (no offset: UTC)"
_OPTIONS = {
    "user_id": "--user",
    "after": "--after",
    "until": "--until",
    "since": "--since",
    "before": "--before",
}
"""Each ReplayQuery field's command-line option, to name them in errors."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; a time without an offset is UTC."""
    from replay import parse_time as parse

    try:
        return parse(text)
    except ValueError as error:
        raise typer.BadParameter(f"{error}; use {_TIME_HELP}") from None


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
    Exit status: 0 streamed, 1 an event could not be replayed, 4 the ledger has nothing of
    --user's.
    """
    from replay import InvalidQuery, ReplayError, ReplayQuery, replay

    query = ReplayQuery(user, _memory_id(memory), after, until, since, before, as_of)
    try:
        query.check()
    except InvalidQuery as error:
        if error.missing:
            reason = f"needs {_OPTIONS[error.missing]} (whose memories)"
        else:
            reason = f"cannot be combined with {', '.join(_OPTIONS[n] for n in error.conflicts)}"
        raise typer.BadParameter(reason, param_hint="'--as-of'") from None

    with open_ledger() as ledger:
        if query.user_id is not None:
            require_user(ledger, query.user_id)  # a user the ledger lacks: exit status 4
        complete_shredding(ledger)  # keys that outlived their tombstone must not decrypt here
        try:
            _print_lines(replay(ledger, query))
        except ReplayError as error:
            fail(f"memledger: {error}", EXIT_NOT_DONE)


def _memory_id(memory: str | None) -> UUID | None:
    if memory is None:
        return None
    try:
        return UUID(memory)
    except ValueError:
        raise typer.BadParameter(f"{memory!r} is not a UUID", param_hint="'--memory'") from None


def _print_lines(records: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line; stops quietly when the reader goes away (`| head`)."""
    out = sys.stdout
    try:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
    except BrokenPipeError:
        with contextlib.suppress(Exception):  # no second error when Python flushes at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        raise typer.Exit(EXIT_OK) from None
