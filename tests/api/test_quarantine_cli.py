"""`memledger projections quarantine [--retry] [--projection P] [--position N]`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app as cli
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.quarantine import quarantined
from projections.registry import main_projections
from projections.views.active_memories import ActiveMemories
from projections.worker import ProjectionWorker
from tests.poison import propose_with_nul


def quarantine(env: dict[str, Any], *args: str) -> Any:
    return CliRunner().invoke(cli, ["projections", "quarantine", *args], env=env)


def test_lists_one_line_per_event_without_content_and_retries_keep_what_fails(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], env: dict[str, Any]
) -> None:
    position = propose_with_nul(ledger, "mallory")
    make_worker(main_projections()).catch_up()

    listed = quarantine(env)
    assert listed.exit_code == 0, listed.output
    [line] = listed.stdout.splitlines()
    assert line.split()[:3] == ["candidates", "position", str(position)]
    assert "memledger:MemoryCandidate.Proposed" in line and "secret" not in line
    assert quarantine(env, "--projection", "audit_log").stdout == ""
    assert quarantine(env, "--position", str(position + 1)).stdout == ""
    unknown = quarantine(env, "--projection", "nope")
    assert unknown.exit_code == 2 and "unknown projections: nope" in unknown.output

    retried = quarantine(env, "--retry")  # the code is unchanged: it fails again, and stays
    assert retried.exit_code == 1, retried.output
    assert retried.stdout.splitlines() == [f"still quarantined: candidates position {position}"]
    assert quarantine(env).stdout.split()[:3] == line.split()[:3]


def test_a_retry_after_a_fix_applies_the_event_and_removes_it(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    env: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="tea", content="green tea", category="fact"
    )
    assert outcome.memory is not None
    memory_id = outcome.memory.memory_id
    original = ActiveMemories.apply

    def bug(self: ActiveMemories, cur: Any, t: Any, batch: Any) -> None:
        if any(e.originator_id == memory_id for e in batch):
            raise ValueError("a bug, for this one memory")
        original(self, cur, t, batch)

    monkeypatch.setattr(ActiveMemories, "apply", bug)
    worker = make_worker(main_projections())
    worker.catch_up()
    assert worker.quarantined()["active_memories"] == 1
    monkeypatch.undo()  # the fix

    retried = quarantine(env, "--retry", "--projection", "active_memories")
    assert retried.exit_code == 0, retried.output
    assert retried.stdout.splitlines() == [f"applied: active_memories position {outcome.position}"]
    with worker.pool.connection() as conn:
        assert quarantined(conn, worker.tables) == []
    assert worker.quarantined()["active_memories"] == 0
    assert worker.wait(ledger.position("alice"), timeout=1)
    assert quarantine(env, "--retry").exit_code == 0  # nothing left: nothing to do
