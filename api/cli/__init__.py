"""The `memledger` command line (operators' tools); `main` is the console script's entry point.

Each command group lives in a module of its own: serve (and version), mcp, token, users
(erase-user), replay, migrate (migrate legacy, export, import), keys, projections, cluster. The
commands only parse options and call the packages that do the work. Errors: one line on stderr
and a documented exit status, for every command (`api.cli.common`, docs/operations.md).
"""

from __future__ import annotations

import typer

from api.cli.cluster import cluster_app
from api.cli.common import CommandGroup
from api.cli.keys import keys_app
from api.cli.mcp import mcp_command
from api.cli.migrate import export_command, import_command, migrate_app
from api.cli.projections import projections_app
from api.cli.replay import replay_command
from api.cli.serve import serve, version_command
from api.cli.token import token
from api.cli.users import erase_user

__all__ = ["app", "main"]

app = typer.Typer(cls=CommandGroup, no_args_is_help=True, pretty_exceptions_enable=False)


@app.callback()
def memledger() -> None:
    """An event-sourced memory ledger for AI agents."""


app.command("version")(version_command)
app.command("serve")(serve)
app.command("mcp")(mcp_command)
app.command("token")(token)
app.command("erase-user")(erase_user)
app.command("replay")(replay_command)
app.command("export")(export_command)
app.command("import")(import_command)
app.add_typer(keys_app, name="keys")
app.add_typer(projections_app, name="projections")
app.add_typer(migrate_app, name="migrate")
app.add_typer(cluster_app, name="cluster")


def main() -> None:
    """Run the `memledger` command line."""
    app()
