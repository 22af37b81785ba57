"""Every `memledger` command takes `--dev`: the secrets `serve --dev` keeps under the data
folder, found by the one shared option (api/cli/common.py), as MEMLEDGER_DEV=true finds them
(issue 24: operator commands answered "or use --dev" and had no such option)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.bootstrap import (
    build_embedding_worker,
    build_embeddings,
    build_ledger,
    build_worker,
)
from api.cli import app
from api.cli.common import EXIT_BAD_INPUT, EXIT_OK
from api.credentials import jwt_secret
from api.settings import Settings
from api.tokens import verify_token
from domain.model.values import Scope


def leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        return [(path, command)]
    return [leaf for name, each in subcommands.items() for leaf in leaves(each, (*path, name))]


def test_every_command_has_the_dev_option() -> None:
    commands = leaves(typer.main.get_command(app))
    assert len(commands) >= 15
    for path, command in commands:
        assert any("--dev" in param.opts for param in command.params), " ".join(path)


@pytest.fixture
def dev_env(env: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A command's environment with no secret set: only the dev data folder has them."""
    return {
        **env,
        "MEMLEDGER_MASTER_KEY": None,
        "MEMLEDGER_JWT_SECRET": None,
        "MEMLEDGER_DATA_DIR": str(tmp_path / "data"),
    }


def served_in_dev(dev_env: dict[str, Any]) -> Settings:
    """What `serve --dev` would have made: its secrets under the data folder, alice's memory."""
    settings = Settings(  # type: ignore[call-arg]
        database_url=dev_env["MEMLEDGER_DATABASE_URL"],
        db_schema=dev_env["MEMLEDGER_SCHEMA"],
        data_dir=Path(dev_env["MEMLEDGER_DATA_DIR"]),
        dev=True,
        embedder="off",
    )
    ledger = build_ledger(settings)
    url = dev_env["MEMLEDGER_DATABASE_URL"]
    for worker in (
        build_worker(settings, ledger, url),
        build_embedding_worker(settings, ledger, url, build_embeddings(settings)),
    ):
        worker.pool.close()  # their tables made, as `serve` makes them
    try:
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key="tea", content="green", category="fact"
        )
    finally:
        ledger.close()
    return settings


OPERATOR_COMMANDS = [
    ["projections", "status"],
    ["keys", "status"],
    ["replay", "--user", "alice"],
    ["export", "--user", "alice"],
    ["token", "--user", "alice"],
]


@pytest.mark.parametrize("args", OPERATOR_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_operator_commands_use_the_dev_secrets_with_dev(
    args: list[str], dev_env: dict[str, Any]
) -> None:
    served_in_dev(dev_env)
    runner = CliRunner()

    with_dev = runner.invoke(app, [*args, "--dev"], env=dev_env)
    without = runner.invoke(app, args, env=dev_env)  # the flag does not outlive its command
    by_variable = runner.invoke(app, args, env={**dev_env, "MEMLEDGER_DEV": "true"})

    assert with_dev.exit_code == EXIT_OK, with_dev.output
    assert by_variable.exit_code == EXIT_OK, by_variable.output
    assert without.exit_code == EXIT_BAD_INPUT
    assert "--dev" in without.stderr and dev_env["MEMLEDGER_DATA_DIR"] in without.stderr


def test_status_before_any_projection_ran_lists_every_one_at_zero(env: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["projections", "status"], env=env)
    assert result.exit_code == EXIT_OK, result.output
    lines = result.stdout.splitlines()
    assert lines and all(line.split()[2] == "0" for line in lines), lines


def test_a_dev_token_is_signed_with_the_secret_serve_uses(dev_env: dict[str, Any]) -> None:
    settings = served_in_dev(dev_env)
    result = CliRunner().invoke(app, ["token", "--dev", "--user", "alice"], env=dev_env)

    assert result.exit_code == EXIT_OK, result.output
    assert verify_token(result.stdout.strip(), jwt_secret(settings)).user_id == "alice"


def test_replay_with_dev_decrypts_with_the_dev_master_key(dev_env: dict[str, Any]) -> None:
    served_in_dev(dev_env)
    result = CliRunner().invoke(app, ["replay", "--dev", "--user", "alice"], env=dev_env)

    assert result.exit_code == EXIT_OK, result.output
    assert '"green"' in result.stdout
