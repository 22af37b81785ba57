"""The `memledger` command line: serve, keys and user erasure (operators' tools)."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer
from pydantic import SecretStr

from api.settings import Settings

__all__ = ["app", "main"]

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
keys_app = typer.Typer(no_args_is_help=True, help="Master and data key operations.")
app.add_typer(keys_app, name="keys")


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


@app.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="interface to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to listen on")] = None,
    dev: Annotated[bool, typer.Option(help="local development: generate missing secrets")] = False,
) -> None:
    """Serve the HTTP API (embedded PostgreSQL when MEMLEDGER_DATABASE_URL is unset)."""
    import uvicorn

    from api.app import create_app
    from api.bootstrap import build_ledger, jwt_secret
    from domain.ledger.keyring import KeyringError

    settings = _settings(dev=dev)
    try:
        settings = settings.model_copy(update={"jwt_secret": SecretStr(jwt_secret(settings))})
        ledger = build_ledger(settings)
    except KeyringError as error:
        typer.echo(f"memledger: {error}", err=True)
        raise typer.Exit(2) from None
    shredded = ledger.complete_shredding()
    if shredded:
        typer.echo(f"memledger: destroyed {shredded} data keys that outlived a forget", err=True)
    uvicorn.run(
        create_app(ledger),
        host=host or settings.host,
        port=port or settings.port,
        log_level="info",
        timeout_graceful_shutdown=10,
    )
    ledger.close()


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

    ledger = build_ledger(_settings())
    with Progress(transient=not sys.stderr.isatty()) as progress:
        task = progress.add_task("re-wrapping data keys", total=None)
        done = ledger.keys.rotate(batch, progress=lambda n: progress.advance(task, n))
    typer.echo(f"re-wrapped {done} data keys under master key {ledger.keyring.active_id}")
    ledger.close()


@keys_app.command("complete-shredding")
def complete_shredding() -> None:
    """Destroy data keys that outlived their tombstone (e.g. after restoring a key backup)."""
    from api.bootstrap import build_ledger

    ledger = build_ledger(_settings())
    typer.echo(f"destroyed {ledger.complete_shredding()} data keys")
    ledger.close()


@app.command("erase-user")
def erase_user(
    user: Annotated[str, typer.Option(help="the user_id to erase")],
    yes: Annotated[bool, typer.Option("--yes", help="confirm without asking")] = False,
) -> None:
    """Irrecoverably forget every memory, candidate and setting of one user."""
    from api.bootstrap import build_ledger

    if not yes:
        typer.confirm(f"Erase every memory of {user!r}? This cannot be undone", abort=True)
    ledger = build_ledger(_settings())
    outcome = ledger.erase_user(user)
    typer.echo(f"erased {user} at ledger position {outcome.position}")
    ledger.close()


def _settings(**overrides: object) -> Settings:
    values = {k: v for k, v in overrides.items() if v}
    return Settings(**values)  # type: ignore[arg-type]


def main() -> None:
    """Run the `memledger` command line."""
    app()
