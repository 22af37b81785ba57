"""`memledger keys rotate | status | complete-shredding`: master and data key operations.

The work is the ledger's (`MemoryLedger.rotation`, domain/ledger/rotation.py); this only prints.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli.common import EXIT_REFUSED, fail, load_settings

__all__ = ["keys_app"]

keys_app = typer.Typer(no_args_is_help=True, help="Master and data key operations.")


@keys_app.command("rotate")
def rotate_keys(
    batch: Annotated[int, typer.Option(min=1, help="keys re-wrapped per transaction")] = 1000,
    retire: Annotated[
        bool,
        typer.Option(
            "--retire",
            help="then say which older master keys may be destroyed (exit 5 while one may not)",
        ),
    ] = False,
) -> None:
    """Re-wrap every data key under the first master key (events are never touched).

    Refused (exit status 5, nothing re-wrapped) while a connected memledger process does not
    hold the first key: add the new key after the current one in every process and restart
    them, then run this with the new key first (docs/operations.md, "Master key rotation"). With
    --retire, then checks that the older keys may be destroyed and names them.
    """
    from rich.progress import Progress

    from api.bootstrap import build_ledger
    from domain.ledger.rotation import RotationRefused

    ledger = build_ledger(load_settings())
    try:
        with Progress(transient=not sys.stderr.isatty()) as progress:
            task = progress.add_task("re-wrapping data keys", total=None)
            done = ledger.rotation.rotate(batch, progress=lambda n: progress.advance(task, n))
        typer.echo(f"re-wrapped {done} data keys under master key {ledger.keyring.active_id}")
        retired = ledger.rotation.retire() if retire else None
    except RotationRefused as error:
        fail(f"memledger: {error}", EXIT_REFUSED)
    finally:
        ledger.close()
    if retired is not None:
        if retired:
            typer.echo(
                f"no data key is wrapped under {', '.join(retired)} any more: remove it from every"
                " process's MEMLEDGER_MASTER_KEY, then destroy it; every copy it wrapped (dead"
                " tuples, WAL, backups) is unreadable from then on"
            )
        else:
            typer.echo("no older master key is held here: nothing to retire")


@keys_app.command("status")
def key_status() -> None:
    """Data keys per master key, and the connected memledger processes' master keys.

    A master key may be dropped once no data key is wrapped under it and no process is
    configured with it first (rotate until its count is gone).
    """
    from api.bootstrap import build_ledger

    ledger = build_ledger(load_settings())
    try:
        status = ledger.rotation.status()
    finally:
        ledger.close()
    typer.echo(f"{'master key':<16}  {'here':<8}  {'data keys':>9}")
    here = dict.fromkeys(status.held_ids, "held") | {status.active_id: "active"}
    for key_id in dict.fromkeys([*status.held_ids, *status.wrapped]):
        role = here.get(key_id, "not held")
        typer.echo(f"{key_id}  {role:<8}  {status.wrapped.get(key_id, 0):>9}")
    typer.echo(f"{len(status.sessions)} connected memledger sessions (this command's included):")
    for session in status.sessions:
        typer.echo(f"  {session.describe()}")
    elsewhere = status.wrapping_elsewhere
    if elsewhere:
        typer.echo(
            f"{len(elsewhere)} sessions wrap new data keys under another master key:"
            f" restart their processes with {status.active_id} first"
        )
    retired = status.retired_in_use
    if retired:
        # Held keys are listed newest first; one this process does not hold is older still.
        order = {key_id: i for i, key_id in enumerate(status.held_ids)}
        oldest = max(retired, key=lambda key_id: order.get(key_id, len(order)))
        typer.echo(
            f"oldest master key still in use: {oldest} ({retired[oldest]} data keys);"
            " run `memledger keys rotate --retire`"
        )
    else:
        typer.echo(f"every data key is under the active master key {status.active_id}")


@keys_app.command("complete-shredding")
def complete_shredding_command() -> None:
    """Destroy data keys that outlived their tombstone (e.g. after restoring a key backup)."""
    from api.bootstrap import build_ledger

    ledger = build_ledger(load_settings())
    typer.echo(f"destroyed {ledger.complete_shredding()} data keys")
    ledger.close()
