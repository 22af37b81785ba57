"""`memledger replay` run in-process, as the tests of the command and of its HTTP twin use it."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from api.cli.replay import replay_command

__all__ = ["command_env", "replay_cli", "run_replay"]


def replay_cli() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(replay_command)
    app.command("noop")(lambda: None)  # with two commands, "replay" is a subcommand as in prod
    return app


def command_env(database_url: str, schema: str, master_key: str) -> dict[str, str | None]:
    """The command's environment: this test's database, schema and master key."""
    return {
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_MASTER_KEY_FILE": None,
    }


def run_replay(cli: typer.Typer, env: dict[str, str | None], *args: str) -> Any:
    return CliRunner().invoke(cli, ["replay", *args], env=env)
