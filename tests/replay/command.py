"""`memledger replay` run in-process, as the tests of the command and of its HTTP twin use it."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from api.cli.replay import replay_command

__all__ = ["replay_cli", "run_replay"]


def replay_cli() -> typer.Typer:
    app = typer.Typer()
    app.command("replay")(replay_command)
    app.command("noop")(lambda: None)  # with two commands, "replay" is a subcommand as in prod
    return app


def run_replay(cli: typer.Typer, env: dict[str, str | None], *args: str) -> Any:
    return CliRunner().invoke(cli, ["replay", *args], env=env)
