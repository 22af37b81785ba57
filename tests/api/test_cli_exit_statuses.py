"""The exit-status table (docs/operations.md) applied alike by every command: a user the ledger
lacks is 4 for replay and export as for erase-user, a refused database role is 6 (not
"unavailable"), and no command exits with a number of its own (issue 24)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_DATABASE_DENIED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    describe,
)
from domain.errors import LedgerUnavailable
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from tests.api.test_cli_errors import one_line_error
from tests.conftest import REPO_ROOT

USER_COMMANDS = [["replay", "--user"], ["export", "--user"]]


@pytest.mark.parametrize("args", USER_COMMANDS, ids=lambda a: a[0])
def test_a_user_the_ledger_lacks_is_status_4_as_for_erase_user(
    args: list[str], ledger: MemoryLedger, env: dict[str, Any]
) -> None:
    ledger.create_memory("bob", scope=Scope.global_(), memory_key="k", content="c", category="fact")

    missing = CliRunner().invoke(app, [*args, "nobody"], env=env)
    known = CliRunner().invoke(app, [*args, "bob"], env=env)

    assert "nothing of user 'nobody'" in one_line_error(missing, EXIT_NOT_FOUND)
    assert missing.stdout == ""  # nothing written for a stranger
    assert known.exit_code == EXIT_OK, known.output
    assert '"bob"' in known.stdout


def test_an_unknown_database_role_reads_as_refused_not_unavailable(env: dict[str, Any]) -> None:
    env = {**env, "MEMLEDGER_DATABASE_URL": "postgresql://no_such_role_i24@127.0.0.1:5432/test"}
    result = CliRunner().invoke(app, ["projections", "status"], env=env)

    line = one_line_error(result, EXIT_DATABASE_DENIED)
    assert "refused this role" in line and "no_such_role_i24" in line
    assert "unavailable" not in line


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (
            psycopg.errors.InsufficientPrivilege("permission denied for schema s"),
            EXIT_DATABASE_DENIED,
        ),
        (
            psycopg.errors.InvalidPassword("password authentication failed for user x"),
            EXIT_DATABASE_DENIED,
        ),
        (
            psycopg.errors.InvalidAuthorizationSpecification('role "x" does not exist'),
            EXIT_DATABASE_DENIED,
        ),
        (
            psycopg.OperationalError('FATAL:  password authentication failed for user "x"'),
            EXIT_DATABASE_DENIED,
        ),
        (psycopg.OperationalError('FATAL:  database "nope" does not exist'), EXIT_BAD_INPUT),
        (psycopg.OperationalError("connection refused"), EXIT_UNAVAILABLE),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_database_errors_map_by_their_class(error: Exception, status: int) -> None:
    assert describe(error)[0] == status
    try:  # the domain's wrapping of an outage keeps the cause that tells
        raise LedgerUnavailable("database unavailable") from error
    except LedgerUnavailable as wrapped:
        assert describe(wrapped)[0] == status


def test_no_command_exits_with_a_number_of_its_own() -> None:
    bare = re.compile(r"typer\.Exit\(\d|fail\([^)]*,\s*\d")
    for module in sorted(Path(REPO_ROOT, "api", "cli").glob("*.py")):
        if module.name != "common.py":
            assert not bare.search(module.read_text()), module.name
