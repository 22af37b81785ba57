"""`memledger keys rotate | complete-shredding`: master and data key operations."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli.common import load_settings

__all__ = ["keys_app"]

keys_app = typer.Typer(no_args_is_help=True, help="Master and data key operations.")


@keys_app.command("rotate")
def rotate_keys(
    batch: Annotated[int, typer.Option(min=1, help="keys re-wrapped per transaction")] = 1000,
) -> None:
    """Re-wrap every data key under the first master key (events are never touched).

    Put the new key first in MEMLEDGER_MASTER_KEY, keep the old ones after it, run this,
    then remove the old ones.
    """
    from rich.progress import Progress

    from api.bootstrap import build_ledger

    ledger = build_ledger(load_settings())
    with Progress(transient=not sys.stderr.isatty()) as progress:
        task = progress.add_task("re-wrapping data keys", total=None)
        done = ledger.keys.rotate(batch, progress=lambda n: progress.advance(task, n))
    typer.echo(f"re-wrapped {done} data keys under master key {ledger.keyring.active_id}")
    ledger.close()


@keys_app.command("complete-shredding")
def complete_shredding_command() -> None:
    """Destroy data keys that outlived their tombstone (e.g. after restoring a key backup)."""
    from api.bootstrap import build_ledger

    ledger = build_ledger(load_settings())
    typer.echo(f"destroyed {ledger.complete_shredding()} data keys")
    ledger.close()
