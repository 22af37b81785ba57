"""`memledger token`: a signed token the server accepts, refused inputs exit 2 with a message."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from typer.testing import CliRunner

from api.cli import app
from api.credentials import jwt_secret
from api.schemas.tools import tool_specs
from api.settings import Settings
from api.tokens import InvalidToken, mint_token, verify_token

SECRET = "cli-test-secret-of-at-least-32-bytes!!"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, tmp_path: Path, *args: str, secret: str | None = SECRET):
    env = {"MEMLEDGER_JWT_SECRET": secret, "MEMLEDGER_DATA_DIR": str(tmp_path / "data")}
    return runner.invoke(app, ["token", *args], env=env)


def test_prints_only_a_token_the_server_verifies(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(
        runner,
        tmp_path,
        "--user", "alice",
        "--workspace", "learning",
        "--mode", "no_write",
        "--role", "auditor",
        "--role", "admin",
        "--tool", "search_core_memories",
        "--tool", "list_core_memories",
        "--ttl-hours", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert len(result.stdout.strip().splitlines()) == 1
    identity = verify_token(token, SECRET)
    assert identity.user_id == "alice"
    assert identity.workspace == "learning" and identity.mode == "no_write"
    assert identity.roles == {"auditor", "admin"}
    assert identity.tools == {"search_core_memories", "list_core_memories"}
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    remaining = identity.claims["exp"] - time.time()
    assert 2 * 3600 - 60 < remaining <= 2 * 3600


def test_defaults_name_only_the_user(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, tmp_path, "--user", "bob")
    assert result.exit_code == 0, result.output
    claims = verify_token(result.stdout.strip(), SECRET).claims
    assert set(claims) == {"sub", "exp"}  # no workspace, mode normal, no roles, every tool
    assert 12 * 3600 - 60 < claims["exp"] - time.time() <= 12 * 3600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workspace", "lab"], "--workspace must be one of learning, teaching, research"),
        (["--workspace", "Learning"], "--workspace must be one of"),
        (["--mode", "readonly"], "--mode must be one of normal, no_write, isolated"),
        (["--role", ""], "must not be empty"),
    ],
)
def test_invalid_values_exit_2_with_a_clear_message(
    runner: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    result = invoke(runner, tmp_path, "--user", "alice", *args)
    assert result.exit_code == 2
    assert message in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "claims", "message"),
    [
        (["--user", "bad user"], {"user_id": "bad user"}, "--user must be 1 to 200 characters"),
        (["--user", "a" * 201], {"user_id": "a" * 201}, "--user must be 1 to 200 characters"),
        (["--user", "-alice"], {"user_id": "-alice"}, "starting with a letter or digit"),
        (["--role", "a b"], {"roles": ["a b"]}, "--role must be a list of at most 64 names"),
        (
            [arg for i in range(65) for arg in ("--role", f"r{i}")],
            {"roles": [f"r{i}" for i in range(65)]},
            "--role must be a list of at most 64 names",
        ),
        (["--tool", "search core"], {"tools": ["search core"]}, "--tool must be a list"),
    ],
    ids=["space", "long", "dash", "role", "roles", "tool"],
)
def test_a_value_the_server_refuses_is_refused_before_signing(
    runner: CliRunner, tmp_path: Path, args: list[str], claims: dict, message: str
) -> None:
    user = claims.pop("user_id", "alice")
    with pytest.raises(InvalidToken):  # the server's own verdict on such a token
        verify_token(mint_token(SECRET, user, **claims), SECRET)

    result = invoke(runner, tmp_path, *(["--user", "alice"] if user == "alice" else []), *args)

    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_tool_that_does_not_exist_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, tmp_path, "--user", "alice", "--tool", "nope_tool")

    assert result.exit_code == 2 and result.stdout == ""
    assert "--tool must name one of the tools" in result.stderr and "'nope_tool'" in result.stderr
    for spec in tool_specs():  # each real one is accepted
        ok = invoke(runner, tmp_path, "--user", "alice", "--tool", spec.name)
        assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("args", [[], ["--user", "alice", "--ttl-hours", "0"]])
def test_a_missing_user_or_a_bad_ttl_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    result = runner.invoke(app, ["token", *args], env={"MEMLEDGER_JWT_SECRET": SECRET})
    assert result.exit_code == 2 and result.stdout == ""


def test_without_a_secret_it_refuses_unless_dev(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, tmp_path, "--user", "alice", secret=None)
    assert result.exit_code == 2
    assert "MEMLEDGER_JWT_SECRET is required" in result.stderr
    assert not (tmp_path / "data").exists()  # nothing generated outside dev mode


def test_dev_mode_shares_the_secret_file_of_serve_dev(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMLEDGER_JWT_SECRET", raising=False)
    first = invoke(runner, tmp_path, "--user", "alice", "--dev", secret=None)
    assert first.exit_code == 0, first.output
    secret_file = tmp_path / "data" / "jwt.secret"
    assert secret_file.exists() and oct(secret_file.stat().st_mode & 0o777) == "0o600"
    # what `memledger serve --dev` verifies with: the same settings, the same function
    served = jwt_secret(Settings(dev=True, data_dir=tmp_path / "data"))  # type: ignore[call-arg]
    assert verify_token(first.stdout.strip(), served).user_id == "alice"
    second = invoke(runner, tmp_path, "--user", "bob", "--dev", secret=None)
    assert verify_token(second.stdout.strip(), served).user_id == "bob"  # reused, not replaced


def test_a_configured_secret_wins_over_dev(runner: CliRunner, tmp_path: Path) -> None:
    result = invoke(runner, tmp_path, "--user", "alice", "--dev")
    assert result.exit_code == 0
    assert verify_token(result.stdout.strip(), SECRET).user_id == "alice"


def test_a_ttl_over_the_maximum_token_lifetime_is_refused(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = invoke(runner, tmp_path, "--user", "alice", "--ttl-hours", "25")
    assert result.exit_code == 2 and result.stdout == ""
    assert "--ttl-hours must be at most 24" in result.stderr
    assert invoke(runner, tmp_path, "--user", "alice", "--ttl-hours", "24").exit_code == 0


def test_the_default_ttl_stays_within_a_shorter_maximum(runner: CliRunner, tmp_path: Path) -> None:
    env = {
        "MEMLEDGER_JWT_SECRET": SECRET,
        "MEMLEDGER_DATA_DIR": str(tmp_path / "data"),
        "MEMLEDGER_MAX_TOKEN_LIFETIME": "3600",
    }
    result = runner.invoke(app, ["token", "--user", "alice"], env=env)
    assert result.exit_code == 0, result.output
    claims = verify_token(result.stdout.strip(), SECRET, max_lifetime=3600).claims
    assert 3600 - 60 < claims["exp"] - time.time() <= 3600
