"""`memledger export` on one instance, `memledger import` on another: the same memories."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from api.app import create_app
from api.cli.migrate import export_command, import_command
from api.embedded import ensure_schema
from api.metrics import Metrics
from api.services import Services
from domain.ledger.keyring import generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import token
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker, ensure_tables
from tests.schemas import drop_schema

pytestmark = pytest.mark.integration

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"  # as in tests/conftest.py
USER = "alice"
# What an instance gives the same memory anew; everything else must be identical.
PER_INSTANCE = {"memory_id", "created_at", "updated_at", "last_confirmed_at"}


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("export")(export_command)
    app.command("import")(import_command)
    return app


def env_for(database_url: str, schema: str, master_key: str) -> dict[str, str | None]:
    return {
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_MASTER_KEY_FILE": None,
    }


@dataclass
class Instance:
    """A second memledger: its own schema, master key, ledger, worker and HTTP client."""

    schema: str
    master_key: str
    ledger: MemoryLedger
    client: TestClient

    def env(self, database_url: str) -> dict[str, str | None]:
        return env_for(database_url, self.schema, self.master_key)


@pytest.fixture
def other(database_url: str, make_ledger: Callable[..., MemoryLedger]) -> Iterator[Instance]:
    schema, key = f"t_{uuid.uuid4().hex[:12]}", generate_master_key()
    ensure_schema(database_url, schema)
    pool: ConnectionPool[Any] = ConnectionPool(
        database_url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
    )
    ledger = make_ledger(keys=[key], schema=schema)
    ensure_tables(pool, schema, all_projections())
    worker = ProjectionWorker(ledger, pool, schema, all_projections())
    worker.start()
    services = Services(
        ledger, Reads(pool, schema, ledger.partition), Metrics(), JWT_SECRET, worker
    )
    try:
        with TestClient(create_app(services), raise_server_exceptions=False) as client:
            yield Instance(schema, key, ledger, client)
    finally:
        worker.stop()
        pool.close()
        drop_schema(database_url, schema)


@pytest.fixture
def source_env(database_url: str, pg_schema: str, master_key: str) -> dict[str, str | None]:
    return env_for(database_url, pg_schema, master_key)


def api_memories(client: TestClient, auth: Auth, ledger: MemoryLedger) -> list[dict[str, Any]]:
    """The user's memories through the API, with their versions, in list order."""
    headers = {**auth(USER), "X-Min-Position": token(ledger.position(USER))}
    listed = client.get(BASE, params={"limit": 200}, headers=headers)
    assert listed.status_code == 200, listed.text
    memories = listed.json()["items"]
    for memory in memories:
        versions = client.get(f"{BASE}/{memory['memory_id']}/versions", headers=headers).json()
        memory["versions"] = [
            {k: v for k, v in version.items() if k in {"revision", "content", "category"}}
            for version in versions["items"]
        ]
    return memories


def comparable(memories: list[dict[str, Any]], *, history: bool = True) -> list[dict[str, Any]]:
    drop = PER_INSTANCE if history else PER_INSTANCE | {"revision", "versions"}
    return [{k: v for k, v in m.items() if k not in drop} for m in memories]


def export(cli: typer.Typer, env: dict[str, str | None], *args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["export", "--user", USER, *args], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    return [json.loads(line) for line in result.stdout.splitlines()]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def do_import(cli: typer.Typer, env: dict[str, str | None], path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["import", "--file", str(path), *args], env=env)


@pytest.fixture
def history(client: TestClient, auth: Auth, ledger: MemoryLedger) -> dict[str, Any]:
    """Alice's memories: scopes, edits, a restore, suppressed, scheduled, forgotten."""
    headers = auth(USER)

    def create(key: str, content: str, **fields: Any) -> dict[str, Any]:
        body = {"memory_key": key, "content": content, "category": "preference"}
        response = client.post(
            BASE, json={"scope_type": "global", **body, **fields}, headers=headers
        )
        assert response.status_code == 201, response.text
        return response.json()

    def patch(memory: dict[str, Any], **fields: Any) -> dict[str, Any]:
        body = {"expected_revision": memory["revision"], **fields}
        response = client.patch(f"{BASE}/{memory['memory_id']}", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    style = create("style", "I prefer examples first.")
    style = patch(style, content="I prefer worked examples first.")
    style = patch(style, content="I prefer short worked examples first.", category="constraint")
    restored = client.post(
        f"{BASE}/{style['memory_id']}/versions/1/restore",
        json={"expected_revision": 3},
        headers=headers,
    )
    assert restored.status_code == 200 and restored.json()["revision"] == 4
    create("language", "Reply in Chinese.", scope_type="workspace", workspace_type="learning")
    muted = create("old_goal", "Pass the driving test.", category="goal")
    assert client.post(f"{BASE}/{muted['memory_id']}/suppress", headers=headers).status_code == 200
    soon = datetime.now(UTC) + timedelta(days=30)
    create(
        "exam",
        "Graduate exam next spring.",
        category="goal",
        review_after=(datetime.now(UTC) - timedelta(days=1)).isoformat(),
        expires_at=soon.isoformat(),
    )
    create("thesis", "Thesis on retrieval.", category="project")
    gone = create("diary", "FORGOTTEN-MARKER diary habit.", category="background")
    assert client.delete(f"{BASE}/{gone['memory_id']}", headers=headers).status_code == 204
    create("bob_only", "Not alice's.", category="fact")  # same key space, other user below
    client.post(
        BASE,
        json={"memory_key": "x", "content": "Bob's.", "category": "fact", "scope_type": "global"},
        headers=auth("bob"),
    )
    target = ledger.get_memory(USER, uuid.UUID(muted["memory_id"]))
    pending = ledger.propose_candidate(
        USER,
        operation="create",
        scope=Scope.global_(),
        memory_key="hobby",
        content="Plays the violin.",
        category="background",
    )
    update = ledger.propose_candidate(
        USER,
        operation="update",
        scope=Scope.global_(),
        memory_key="old_goal",
        content="Pass the driving test in May.",
        category="goal",
        target_memory_id=target.memory_id,
    )
    accepted = ledger.propose_candidate(
        USER,
        operation="create",
        scope=Scope.global_(),
        memory_key="pet",
        content="Has a cat.",
        category="fact",
    )
    assert pending.candidate and update.candidate and accepted.candidate
    ledger.accept_candidate(USER, accepted.candidate.candidate_id)
    return {"forgotten": gone}


def test_export_then_import_gives_identical_memories_through_the_api(
    cli: typer.Typer,
    client: TestClient,
    auth: Auth,
    ledger: MemoryLedger,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    lines = export(cli, source_env, "--include-history")
    header, body = lines[0], lines[1:]
    assert header["format"] == "memledger-export" and header["version"] == 1
    assert header["user_id"] == USER and header["include_history"] is True
    memories = [line for line in body if line["type"] == "memory"]
    candidates = [line for line in body if line["type"] == "candidate"]
    assert (header["memories"], header["candidates"]) == (len(memories), len(candidates))
    assert {c["status"] for c in candidates} == {"pending", "accepted"} and len(candidates) == 3
    # Forgotten memories are never exported, and nothing of another user is.
    text = json.dumps(lines)
    assert "FORGOTTEN-MARKER" not in text and history["forgotten"]["memory_id"] not in text
    assert "Bob's" not in text
    style = next(m for m in memories if m["memory_key"] == "style")
    assert [v["revision"] for v in style["versions"]] == [1, 2, 3, 4]

    path = write(tmp_path / "alice.jsonl", lines)
    imported = do_import(cli, other.env(database_url), path, "--user", USER)
    assert imported.exit_code == 0, (imported.output, imported.exception)
    assert f"{len(memories)} memories in the file, {len(memories)} created" in imported.stdout
    assert "not_recreated_decided 1" in imported.stdout and "proposed 2" in imported.stdout

    source = api_memories(client, auth, ledger)
    target = api_memories(other.client, auth, other.ledger)
    assert len(source) == len(memories) == 7
    assert comparable(target) == comparable(source)
    assert any(m["status"] == "suppressed" for m in target)
    assert any(m["workspace_type"] == "learning" for m in target)

    # The origin keeps the source's id and original times; the pending candidates are back.
    moved = other.ledger.repository.get(
        uuid.UUID(next(m["memory_id"] for m in target if m["memory_key"] == "style"))
    )
    assert moved.origin["source_memory_id"] == style["memory_id"]
    assert moved.origin["created_at"] == style["created_at"]
    pending = other.client.get(
        "/me/memory-candidates",
        headers={**auth(USER), "X-Min-Position": token(other.ledger.position(USER))},
    )
    assert pending.status_code == 200, pending.text
    assert sorted(c["proposed_key"] for c in pending.json()["items"]) == ["hobby", "old_goal"]

    # Importing the same file again changes nothing.
    position = other.ledger.recorded()
    again = do_import(cli, other.env(database_url), path)
    assert again.exit_code == 0 and f"{len(memories)} unchanged" in again.stdout
    assert other.ledger.recorded() == position


def test_an_interrupted_import_is_completed_by_running_it_again(
    cli: typer.Typer,
    client: TestClient,
    auth: Auth,
    ledger: MemoryLedger,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    lines = export(cli, source_env, "--include-history")
    # As if killed mid-way: the first memory was created with its first version only.
    first = next(line for line in lines[1:] if line["memory_key"] == "style")
    partial = {
        **first,
        "content": first["versions"][0]["content"],
        "category": first["versions"][0]["category"],
        "versions": first["versions"][:1],
    }
    header = {**lines[0], "memories": 1, "candidates": 0}
    assert (
        do_import(
            cli, other.env(database_url), write(tmp_path / "p.jsonl", [header, partial])
        ).exit_code
        == 0
    )

    resumed = do_import(cli, other.env(database_url), write(tmp_path / "all.jsonl", lines))
    assert resumed.exit_code == 0, resumed.output
    assert "1 updated" in resumed.stdout
    assert comparable(api_memories(other.client, auth, other.ledger)) == comparable(
        api_memories(client, auth, ledger)
    )


def test_without_history_the_current_memories_are_carried_over(
    cli: typer.Typer,
    client: TestClient,
    auth: Auth,
    ledger: MemoryLedger,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    lines = export(cli, source_env)
    assert "versions" not in lines[1] and lines[0]["candidates"] == 0
    assert all(line["type"] == "memory" for line in lines[1:])
    result = do_import(cli, other.env(database_url), write(tmp_path / "a.jsonl", lines))
    assert result.exit_code == 0, result.output
    target = api_memories(other.client, auth, other.ledger)
    assert comparable(target, history=False) == comparable(
        api_memories(client, auth, ledger), history=False
    )
    assert {m["revision"] for m in target} == {1}


def test_a_key_holding_other_content_is_a_conflict_never_overwritten(
    cli: typer.Typer,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    other.ledger.create_memory(
        USER, scope=Scope.global_(), memory_key="thesis", content="Something else.", category="fact"
    )
    lines = export(cli, source_env)
    result = do_import(cli, other.env(database_url), write(tmp_path / "a.jsonl", lines))
    assert result.exit_code == 1
    assert "skipped 'thesis': conflict" in result.stdout
    held = [other.ledger.get_memory(USER, i) for i in other.ledger.memory_ids(USER)]
    assert [m.content for m in held if m.memory_key == "thesis"] == ["Something else."]


def test_a_cut_off_or_foreign_file_is_refused_before_anything_is_written(
    cli: typer.Typer,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    lines = export(cli, source_env)
    cut = do_import(cli, other.env(database_url), write(tmp_path / "cut.jsonl", lines[:-1]))
    assert cut.exit_code == 2 and "cut off" in cut.output
    foreign = do_import(
        cli, other.env(database_url), write(tmp_path / "a.jsonl", lines), "--user", "bob"
    )
    assert foreign.exit_code == 2 and "not 'bob'" in foreign.output
    assert other.ledger.recorded() == 0


def test_expired_or_malformed_memories_are_reported_never_dropped_silently(
    cli: typer.Typer,
    other: Instance,
    database_url: str,
    source_env: dict[str, str | None],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    lines = export(cli, source_env)
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    body = [line for line in lines[1:] if line["memory_key"] not in {"exam", "thesis"}]
    exam = next(line for line in lines[1:] if line["memory_key"] == "exam")
    thesis = next(line for line in lines[1:] if line["memory_key"] == "thesis")
    broken = {k: v for k, v in thesis.items() if k != "scope_type"}
    edited = [lines[0], *body, {**exam, "expires_at": past}, broken]
    result = do_import(cli, other.env(database_url), write(tmp_path / "e.jsonl", edited))
    assert result.exit_code == 1
    assert "skipped 'exam': expired" in result.stdout
    assert "skipped 'thesis': invalid" in result.stdout
    assert f"{len(body)} created, 0 updated, 0 unchanged, 2 skipped" in result.stdout
