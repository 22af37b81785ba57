"""Every `memledger` command fails with one line on stderr and a documented exit status
(docs/operations.md), never a traceback; erase-user and rebuild refuse what would mislead or
lose data (issue 13, failure 6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    describe,
)
from domain.errors import LedgerUnavailable
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.base import Projection
from projections.views.embeddings import Embeddings
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService
from tests.retrieval.test_vector_matrix import Words

COMMANDS = [
    ["erase-user", "--user", "alice", "--yes"],
    ["projections", "status"],
    ["projections", "rebuild", "candidates"],
    ["replay", "--user", "alice"],
    ["keys", "rotate"],
    ["keys", "status"],
    ["keys", "complete-shredding"],
    ["export", "--user", "alice"],
]


def one_line_error(result: Any, status: int) -> str:
    assert result.exit_code == status, (result.output, result.exception)
    assert "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("memledger")
    return line


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_missing_master_key_is_one_line_and_status_2(
    args: list[str], env: dict[str, Any], tmp_path: Any
) -> None:
    env = {**env, "MEMLEDGER_MASTER_KEY": None, "MEMLEDGER_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, args, env=env)
    assert "master key" in one_line_error(result, EXIT_BAD_INPUT)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_invalid_master_key_is_one_line_and_status_2(
    args: list[str], env: dict[str, Any]
) -> None:
    result = CliRunner().invoke(app, args, env={**env, "MEMLEDGER_MASTER_KEY": "not base64!"})
    assert "master key" in one_line_error(result, EXIT_BAD_INPUT)


def test_an_invalid_setting_is_one_line_and_status_2(env: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        app, ["projections", "status"], env={**env, "MEMLEDGER_POOL_SIZE": "0"}
    )
    assert "pool_size" in one_line_error(result, EXIT_BAD_INPUT)


def test_an_unreachable_database_is_one_line_and_status_3(env: dict[str, Any]) -> None:
    env = {
        **env,
        "MEMLEDGER_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1",
        "MEMLEDGER_CONNECT_TIMEOUT": "1",
    }
    result = CliRunner().invoke(app, ["erase-user", "--user", "alice", "--yes"], env=env)
    assert "unavailable" in one_line_error(result, EXIT_UNAVAILABLE)


def test_errors_map_to_the_documented_statuses() -> None:
    assert describe(LedgerUnavailable("gone"))[0] == EXIT_UNAVAILABLE
    status, message = describe(RuntimeError("a\nb"))
    assert status == EXIT_INTERNAL and message == "internal error: RuntimeError: a b"


def test_erase_user_of_an_unknown_user_says_so_and_exits_4(
    ledger: MemoryLedger, env: dict[str, Any]
) -> None:
    ledger.create_memory("bob", scope=Scope.global_(), memory_key="k", content="c", category="fact")
    result = CliRunner().invoke(app, ["erase-user", "--user", "nobody", "--yes"], env=env)
    assert "nobody" in one_line_error(result, EXIT_NOT_FOUND)
    erased = CliRunner().invoke(app, ["erase-user", "--user", "bob", "--yes"], env=env)
    assert erased.exit_code == 0 and erased.stdout.startswith("erased bob"), erased.output
    again = CliRunner().invoke(app, ["erase-user", "--user", "bob", "--yes"], env=env)
    assert again.exit_code == 0 and "nothing was left to erase" in again.stdout, again.output


def test_rebuild_with_the_embedder_off_keeps_stored_vectors_unless_told(
    ledger: MemoryLedger,
    env: dict[str, Any],
    make_worker: Callable[[list[Projection]], ProjectionWorker],
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="tea", content="green tea", category="fact"
    )
    embedding = make_worker([Embeddings(EmbeddingService(Words()))])
    embedding.catch_up()

    def stored() -> int:
        with embedding.pool.connection() as conn:
            query = f'SELECT count(vector) FROM "{embedding.schema}".memledger_embeddings'
            row = conn.execute(query).fetchone()  # type: ignore[call-overload]
            return int(row[0])

    assert stored() == 1
    refused = CliRunner().invoke(app, ["projections", "rebuild", "embeddings"], env=env)
    line = one_line_error(refused, EXIT_REFUSED)
    assert "1 stored vectors" in line and "--drop-vectors" in line
    assert stored() == 1
    others = CliRunner().invoke(app, ["projections", "rebuild", "candidates"], env=env)
    assert others.exit_code == 0, others.output
    dropped = CliRunner().invoke(
        app, ["projections", "rebuild", "embeddings", "--drop-vectors"], env=env
    )
    assert dropped.exit_code == 0, dropped.output
    assert stored() == 0
