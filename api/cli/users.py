"""`memledger erase-user`: irrecoverably forget everything of one user."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import load_settings

__all__ = ["erase_user"]


def erase_user(
    user: Annotated[str, typer.Option(help="the user_id to erase")],
    yes: Annotated[bool, typer.Option("--yes", help="confirm without asking")] = False,
) -> None:
    """Irrecoverably forget every memory, candidate and setting of one user."""
    from api.bootstrap import build_ledger

    if not yes:
        typer.confirm(f"Erase every memory of {user!r}? This cannot be undone", abort=True)
    ledger = build_ledger(load_settings())
    outcome = ledger.erase_user(user)
    typer.echo(f"erased {user} at ledger position {outcome.position}")
    ledger.close()
