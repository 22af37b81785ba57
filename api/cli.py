"""The `memledger` command line."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer

__all__ = ["app", "main"]

app = typer.Typer(no_args_is_help=True)


@app.callback()
def memledger() -> None:
    """An event-sourced memory ledger for AI agents."""


@app.command("version")
def version_command() -> None:
    """Print the installed memledger version."""
    try:
        typer.echo(version("memledger"))
    except PackageNotFoundError:
        typer.echo("unknown")


def main() -> None:
    """Run the `memledger` command line."""
    app()
