"""What the `memledger` commands share: settings, the ledger, `--dev`, their error conventions.

Every command takes `--dev` (`CommandGroup` adds it to each one): local development, the
secrets `serve --dev` generates under the data folder (MEMLEDGER_DEV=true alike); a command
reads it through `load_settings`, never as a parameter of its own.

Every command's errors end as one line on stderr and an exit status (docs/operations.md):
`CommandGroup` (the `memledger` app's group) turns an exception no command handled into one
(`describe`), never a traceback; set MEMLEDGER_TRACEBACK=1 to see it.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import typer
from typer.core import TyperGroup

from api.settings import Settings

if TYPE_CHECKING:
    from domain.ledger.ledger import MemoryLedger

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_DATABASE_DENIED",
    "EXIT_INTERNAL",
    "EXIT_NOT_DONE",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNAVAILABLE",
    "CommandGroup",
    "complete_shredding",
    "describe",
    "dump_stacks_on_sigusr1",
    "fail",
    "load_settings",
    "open_ledger",
    "require_user",
]

# Exit statuses shared by every command: the table of docs/operations.md ("Errors and exit
# statuses"). A command exits with one of these names, never with a bare number.
EXIT_OK: Final = 0
EXIT_NOT_DONE: Final = 1  # it ran, but its own outcome is "not done" (said in its help)
EXIT_BAD_INPUT: Final = 2  # options, settings, master key: nothing was changed
EXIT_UNAVAILABLE: Final = 3  # the database could not be reached or gave up: run again
EXIT_NOT_FOUND: Final = 4  # what the command names does not exist (a user the ledger lacks)
EXIT_REFUSED: Final = 5  # it would destroy data it cannot recompute, without the flag for it
EXIT_DATABASE_DENIED: Final = 6  # the database refused the role: password, role, privilege
EXIT_INTERNAL: Final = 70  # a bug: an exception no rule covers (EX_SOFTWARE)

_DENIED_STATES: Final = ("28", "42501")
"""SQLSTATEs of a refused role: class 28 (invalid authorization: unknown role, wrong
password, no pg_hba.conf entry) and insufficient_privilege."""
_DENIED_AT_CONNECT: Final = re.compile(
    r"password authentication failed|role \"[^\"]*\" does not exist|no pg_hba\.conf entry"
    r"|permission denied|is not permitted to log in|authentication failed"
)
"""The same, in a failed connection's message: libpq does not hand psycopg the server's
SQLSTATE for an error during the connection's start-up (its error has `sqlstate` None)."""
_NO_DATABASE: Final = re.compile(r'database "[^"]*" does not exist')


_DEV: ContextVar[bool] = ContextVar("memledger_dev", default=False)
"""Whether the running command was given `--dev` (set while its options are parsed)."""


def load_settings(**overrides: object) -> Settings:
    """The settings from the environment; options that are set (truthy) override them, and
    the command's `--dev` sets `dev`."""
    if _DEV.get():
        overrides.setdefault("dev", True)
    values = {k: v for k, v in overrides.items() if v}
    return Settings(**values)  # type: ignore[arg-type]


def _note_dev(value: bool) -> bool:
    if value:
        _DEV.set(True)
    return value


def _dev_option() -> Any:
    """The shared `--dev` option, as typer builds it (taken from a one-option command)."""
    probe = typer.Typer()

    @probe.command()
    def _(
        dev: Annotated[
            bool,
            typer.Option(
                "--dev",
                expose_value=False,
                callback=_note_dev,
                help="local development: the secrets `serve --dev` uses under"
                " MEMLEDGER_DATA_DIR, generated if missing (as MEMLEDGER_DEV=true)",
            ),
        ] = False,
    ) -> None: ...

    return typer.main.get_command(probe).params[0]


def _with_dev_option(command: Any, option: Any) -> None:
    """Give `command` (each command of a group, recursively) the shared `--dev` option."""
    subcommands = getattr(command, "commands", None)
    if subcommands is not None:
        for each in subcommands.values():
            _with_dev_option(each, option)
    elif not any(param.name == "dev" for param in command.params):
        command.params.append(option)


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


def dump_stacks_on_sigusr1() -> None:
    """From now on `kill -USR1 <pid>` writes every thread's stack to stderr and the process
    goes on: where a stalled worker or a hung request waits, without stopping the service."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def require_user(ledger: MemoryLedger, user_id: str) -> None:
    """NotFound (exit status 4) when the ledger has nothing of the user, as `erase-user` says."""
    from domain.errors import NotFound

    if not ledger.knows_user(user_id):
        raise NotFound(f"the ledger has nothing of user {user_id!r}")


def fail(message: str, status: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print the message on stderr and exit with `status` (2: bad input or configuration)."""
    typer.echo(message, err=True)
    raise typer.Exit(status)


class CommandGroup(TyperGroup):
    """The `memledger` group: every command takes `--dev`, and an exception a command let
    through becomes one line on stderr and its exit status (`describe`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _with_dev_option(self, _dev_option())

    def invoke(self, ctx: Any) -> Any:
        reset = _DEV.set(False)  # each invocation parses its own (CliRunner reuses a process)
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
        finally:
            _DEV.reset(reset)


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
    database = _database_refusal(error)
    if database is not None:
        return database
    if isinstance(error, LedgerUnavailable | PersistenceError | psycopg.OperationalError):
        return EXIT_UNAVAILABLE, f"the database is unavailable: {text}"
    return EXIT_INTERNAL, f"internal error: {type(error).__name__}: {text}"


def _database_refusal(error: BaseException) -> tuple[int, str] | None:
    """Exit 6 when the database refused the role, 2 when the named database does not exist:
    not outages, so running again will not help (the error or any it was raised from)."""
    import psycopg

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg.Error):
            text = " ".join(str(current).split())
            state = current.sqlstate or ""
            if state.startswith(_DENIED_STATES) or (not state and _DENIED_AT_CONNECT.search(text)):
                return EXIT_DATABASE_DENIED, (
                    "the database refused this role (check the user and password of"
                    f" MEMLEDGER_DATABASE_URL, and the role's grants): {text}"
                )
            if state == "3D000" or (not state and _NO_DATABASE.search(text)):
                return EXIT_BAD_INPUT, f"no such database (MEMLEDGER_DATABASE_URL): {text}"
        current = current.__cause__ or current.__context__
    return None
