"""`memledger mcp`: the agent tools over MCP on stdin/stdout, acting with MEMLEDGER_TOKEN."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import load_settings

__all__ = ["mcp_command"]


def mcp_command(
    worker: Annotated[bool, typer.Option(help="run the projection workers in this process")] = True,
) -> None:
    """Serve the agent tools over MCP on stdin/stdout, acting with the token MEMLEDGER_TOKEN."""
    from api.mcp import run_stdio

    raise typer.Exit(run_stdio(load_settings(), worker=worker))
