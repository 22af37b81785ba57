"""`memledger erase-user`: irrecoverably forget everything of one user."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import open_ledger

__all__ = ["erase_user"]


def erase_user(
    user: Annotated[str, typer.Option(help="the user_id to erase")],
    yes: Annotated[bool, typer.Option("--yes", help="confirm without asking")] = False,
) -> None:
    """Irrecoverably forget every memory, candidate and setting of one user.

    The user's writes wait while it runs and commit after it (a fresh start, which another
    erase takes too), or fail as unavailable. Exit status: 0 erased, 4 the ledger has nothing
    of that user (nothing changed), 2 bad configuration, 3 database unavailable.
    """
    if not yes:
        typer.confirm(f"Erase every memory of {user!r}? This cannot be undone", abort=True)
    with open_ledger() as ledger:
        outcome = ledger.erase_user(user)  # NotFound: exit status 4 (api.cli.common)
    if outcome.position is None:
        typer.echo(f"{user}: nothing was left to erase")
    else:
        typer.echo(f"erased {user} at ledger position {outcome.position}")
