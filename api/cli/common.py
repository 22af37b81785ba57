"""What the `memledger` commands share: settings, the ledger, and their error conventions.

Every command's errors end as one line on stderr and an exit status (docs/operations.md):
`CommandGroup` (the `memledger` app's group) turns an exception no command handled into one
(`describe`), never a traceback; set MEMLEDGER_TRACEBACK=1 to see it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, NoReturn

import typer
from typer.core import TyperGroup

from api.settings import Settings

if TYPE_CHECKING:
    from domain.ledger.ledger import MemoryLedger

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOT_FOUND",
    "EXIT_REFUSED",
    "EXIT_UNAVAILABLE",
    "CommandGroup",
    "complete_shredding",
    "describe",
    "fail",
    "load_settings",
    "open_ledger",
]

# Exit statuses shared by every command (1 is left to each command's own "not done" outcome).
EXIT_BAD_INPUT: Final = 2  # options, settings, master key: nothing was changed
EXIT_UNAVAILABLE: Final = 3  # the database could not be reached or gave up: run again
EXIT_NOT_FOUND: Final = 4  # what the command names does not exist (erase-user of a stranger)
EXIT_REFUSED: Final = 5  # it would destroy data it cannot recompute, without the flag for it
EXIT_INTERNAL: Final = 70  # a bug: an exception no rule covers (EX_SOFTWARE)


def load_settings(**overrides: object) -> Settings:
    """The settings from the environment; options that are set (truthy) override them."""
    values = {k: v for k, v in overrides.items() if v}
    return Settings(**values)  # type: ignore[arg-type]


@contextmanager
def open_ledger(prefix: str = "memledger:") -> Iterator[MemoryLedger]:
    """The configured ledger, closed on the way out; no usable master key: `fail(prefix ...)`."""
    from api.bootstrap import build_ledger
    from domain.ledger.keyring import KeyringError

    try:
        ledger = build_ledger(load_settings())
    except KeyringError as error:
        fail(f"{prefix} {error}")
    try:
        yield ledger
    finally:
        ledger.close()


def complete_shredding(ledger: MemoryLedger) -> None:
    """Destroy data keys that outlived their tombstone, saying so on stderr.

    Run before anything decrypts: a restored key backup must not bring content back.
    """
    shredded = ledger.complete_shredding()
    if shredded:
        typer.echo(f"memledger: destroyed {shredded} data keys that outlived a forget", err=True)


def fail(message: str, status: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print the message on stderr and exit with `status` (2: bad input or configuration)."""
    typer.echo(message, err=True)
    raise typer.Exit(status)


class CommandGroup(TyperGroup):
    """The `memledger` group: an exception a command let through becomes one line on stderr
    and its exit status (`describe`)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            # Usage errors, --help, typer.Exit, Abort: the framework's own (typer vendors
            # click, so they are matched by where they are defined) answer as they do.
            framework = type(error).__module__.startswith(("click.", "typer."))
            if framework or os.environ.get("MEMLEDGER_TRACEBACK"):
                raise
            status, message = describe(error)
            fail(f"memledger: {message}", status)


def describe(error: Exception) -> tuple[int, str]:
    """The exit status and the one-line message of an error no command handled."""
    import psycopg
    from eventsourcing.persistence import PersistenceError
    from pydantic import ValidationError

    from domain.errors import InvalidInput, LedgerUnavailable, MasterKeyMissing, NotFound
    from domain.ledger.keyring import KeyringError
    from projections.startup import StartupLocked

    text = " ".join(str(error).split())
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "settings"
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return EXIT_BAD_INPUT, f"invalid setting {where}: {first['msg']}{more}"
    if isinstance(error, KeyringError | InvalidInput | MasterKeyMissing):
        return EXIT_BAD_INPUT, text
    if isinstance(error, NotFound):
        return EXIT_NOT_FOUND, text
    if isinstance(error, StartupLocked):
        return EXIT_UNAVAILABLE, f"a table is locked: {text}"
    if isinstance(error, LedgerUnavailable | PersistenceError | psycopg.OperationalError):
        return EXIT_UNAVAILABLE, f"the database is unavailable: {text}"
    return EXIT_INTERNAL, f"internal error: {type(error).__name__}: {text}"
