"""`memledger replay` through the command line: JSON lines on stdout, exit 2 on bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import typer

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import local_of, partition_of
from domain.model.values import Scope
from replay import as_of, replay_events
from tests.replay.command import replay_cli, run_replay

pytestmark = pytest.mark.integration


@pytest.fixture
def cli() -> typer.Typer:
    return replay_cli()


run = run_replay


def ok(cli: typer.Typer, env: dict[str, str | None], *args: str) -> list[dict[str, Any]]:
    """Run successfully; every stdout line is one JSON object."""
    result = run(cli, env, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture
def moments(ledger: MemoryLedger) -> dict[str, Any]:
    def remember(user: str, key: str, content: str) -> Any:
        outcome = ledger.create_memory(
            user, scope=Scope.global_(), memory_key=key, content=content, category="fact"
        )
        assert outcome.memory is not None
        return outcome.memory.memory_id

    kept = remember("alice", "drink", "café crème")
    gone = remember("alice", "city", "Zürich")
    remember("bob", "drink", "water")
    before_forget = datetime.now(UTC)
    ledger.forget_memory("alice", gone)
    return {"kept": kept, "gone": gone, "before_forget": before_forget}


@pytest.mark.slow  # ~6 s
def test_replay_prints_one_json_object_per_line(
    cli: typer.Typer, env: dict[str, str | None], ledger: MemoryLedger, moments: dict[str, Any]
) -> None:
    result = run(cli, env)
    assert result.exit_code == 0, (result.output, result.exception)
    assert "café crème" in result.stdout  # ensure_ascii=False: text as written
    assert "Zürich" not in result.stdout  # forgotten: its key is gone
    records = ok(cli, env)
    assert records == list(replay_events(ledger))
    assert len(records) == ledger.recorded()
    heads = ledger.heads()
    for partition in {partition_of(r["position"]) for r in records}:  # each gap-free, in order
        mine = [
            local_of(r["position"]) for r in records if partition_of(r["position"]) == partition
        ]
        assert mine == list(range(1, heads[partition] + 1))

    first, second = [r["position"] for r in records if r["user_id"] == "alice"][:2]
    alice = ok(cli, env, "--user", "alice", "--after", str(first))
    assert alice == list(replay_events(ledger, user_id="alice", after=first))
    assert [r["user_id"] for r in alice] == ["alice", "alice"]
    only = ok(cli, env, "--memory", str(moments["gone"]))
    assert [r["event_type"] for r in only] == ["memory.created", "memory.deleted"]
    assert only[0]["redacted"] is True and "content" not in only[0]["data"]
    at = moments["before_forget"].isoformat()
    assert ok(cli, env, "--until", str(second), "--before", at) == records[:2]
    assert ok(cli, env, "--since", at) == records[3:]


def test_as_of_prints_the_reconstructed_memories(
    cli: typer.Typer, env: dict[str, str | None], ledger: MemoryLedger, moments: dict[str, Any]
) -> None:
    at = moments["before_forget"]
    memories = ok(cli, env, "--user", "alice", "--as-of", at.isoformat())
    assert memories == as_of(ledger, "alice", at)
    assert [(m["content"], m["redacted"]) for m in memories] == [
        ("café crème", False),
        (None, True),  # live then, forgotten since: irrecoverable
    ]
    naive_utc = at.astimezone(UTC).replace(tzinfo=None).isoformat()
    assert ok(cli, env, "--user", "alice", "--as-of", naive_utc) == memories
    now = ok(cli, env, "--user", "alice", "--as-of", datetime.now(UTC).isoformat())
    assert [m["memory_id"] for m in now] == [str(moments["kept"])]
    gone = str(moments["gone"])
    one = ok(cli, env, "--user", "alice", "--memory", gone, "--as-of", at.isoformat())
    assert [m["memory_id"] for m in one] == [gone]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "not-a-uuid"], "not a UUID"),
        (["--as-of", "2025-01-01T00:00:00Z"], "'--as-of': needs --user"),
        (["--user", "alice", "--as-of", "2025-01-01", "--after", "3"], "cannot be combined"),
        (["--since", "yesterday"], "not a time"),
        (["--after", "-1"], "--after"),
    ],
)
def test_bad_input_exits_with_2_and_says_why(
    cli: typer.Typer, env: dict[str, str | None], args: list[str], message: str
) -> None:
    result = run(cli, env, *args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())  # the error box may wrap lines
    assert result.stdout == ""  # errors go to stderr, never into the JSON stream


def test_missing_master_key_exits_with_2(cli: typer.Typer, env: dict[str, str | None]) -> None:
    result = run(cli, {**env, "MEMLEDGER_MASTER_KEY": None})
    assert result.exit_code == 2 and "no master key" in result.output
