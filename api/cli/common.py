"""What the `memledger` commands share: settings, the ledger, and their error conventions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

import typer

from api.settings import Settings

if TYPE_CHECKING:
    from domain.ledger.ledger import MemoryLedger

__all__ = ["complete_shredding", "fail", "load_settings", "open_ledger"]


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


def fail(message: str) -> NoReturn:
    """Print the message on stderr and exit with status 2 (bad input or configuration)."""
    typer.echo(message, err=True)
    raise typer.Exit(2)
