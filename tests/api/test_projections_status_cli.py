"""`memledger projections status` answers while a table is locked by another session: it
takes no DDL lock, and waits MEMLEDGER_LOCK_TIMEOUT at most for a lock it needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from typer.testing import CliRunner

from api.cli import app as cli
from api.cli.common import EXIT_UNAVAILABLE
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.registry import main_projections
from projections.worker import ProjectionWorker


def status_while_locked(env: dict[str, Any], database_url: str, table: str) -> Any:
    """The command's result, run while `table` is ACCESS EXCLUSIVE-locked (its answer within
    a minute: a hang fails the test instead of stalling the suite)."""
    schema = env["MEMLEDGER_SCHEMA"]
    results: list[Any] = []
    with psycopg.connect(database_url) as other:
        other.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, table))
        )
        command = threading.Thread(
            target=lambda: results.append(
                CliRunner().invoke(cli, ["projections", "status"], env=env)
            ),
            daemon=True,
        )
        command.start()
        command.join(timeout=60)
        other.rollback()
    assert results, "projections status did not answer while the table was locked"
    return results[0]


def test_status_answers_while_a_view_table_is_locked(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    env: dict[str, Any],
    database_url: str,
) -> None:
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="x", category="fact"
    )
    make_worker(main_projections()).catch_up()
    for table in ("memledger_search_terms", "memledger_active_memories"):
        result = status_while_locked(env, database_url, table)
        assert result.exit_code == 0, result.output
        lines = {line.split()[0]: line.split() for line in result.stdout.splitlines()}
        assert lines["search_terms"][1:] == ["position", "1", "lag", "0"]
        assert "embeddings" in lines


def test_status_gives_up_with_a_locked_tracking_table(
    make_worker: Callable[..., ProjectionWorker], env: dict[str, Any], database_url: str
) -> None:
    make_worker(main_projections())  # the tables exist
    table = "memledger_projection_tracking"
    result = status_while_locked(env | {"MEMLEDGER_LOCK_TIMEOUT": "1"}, database_url, table)
    assert result.exit_code == EXIT_UNAVAILABLE, result.output
    assert "lock timeout" in result.output


def test_status_shows_which_member_holds_which_partitions(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    env: dict[str, Any],
) -> None:
    partitions = ledger.recorder.partitions
    first, second = (make_worker(main_projections(), idle_wait=0.2) for _ in range(2))
    first.start()
    second.start()
    deadline = time.monotonic() + 10
    while sorted([len(first.owned), len(second.owned)]) != [partitions // 2] * 2:
        assert time.monotonic() < deadline, (first.owned, second.owned)
        time.sleep(0.05)
    result = CliRunner().invoke(cli, ["projections", "status", "--members"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    group = next(line for line in lines if line.startswith("projection-worker"))
    assert group.split()[1:] == ["members", "2", "partitions", "held", f"{partitions}/{partitions}"]
    held = [line for line in lines if line.startswith("  pid ")]
    assert len(held) == 2 and all(f"{partitions // 2} partitions" in line for line in held)
