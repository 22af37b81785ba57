"""Issue 22, findings 1 and 2, as they were found: a running `memledger serve` and another
process (`memledger erase-user`, or a second ledger forgetting as a replica would).

The server caches keys for an hour here (MEMLEDGER_KEY_CACHE_TTL), so nothing below passes by
waiting for a cache to expire: after an erase or forget elsewhere the server never shows the
content, never hashes with the dead key, and key uniqueness holds; a rebuild equals live.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import httpx2
import pytest

from domain.ledger.ledger import MemoryLedger
from tests.conftest import command_env
from tests.e2e.test_server_e2e import Server, expect, running_server, serve_command
from tests.faults.harness import projections_rebuilt

pytestmark = pytest.mark.integration


@pytest.fixture
def server(database_url: str, pg_schema: str, master_key: str, tmp_path: Path) -> Iterator[Server]:
    """`memledger serve` whose key cache outlives the test (an hour), embedder off."""
    with running_server(
        database_url, pg_schema, master_key, tmp_path, embedder="off", key_cache_ttl="3600"
    ) as served:
        yield served


def erase_with_the_cli(database_url: str, schema: str, master_key: str, user: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")}
    given = command_env(database_url, schema, master_key)
    env |= {k: v for k, v in given.items() if v is not None}
    command = [*serve_command()[:-1], "erase-user", "--user", user, "--yes"]
    done = subprocess.run(command, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")


def create(client: httpx2.Client, key: str, content: str, status: int = 201) -> dict[str, object]:
    body = {"memory_key": key, "content": content, "category": "fact", "scope_type": "global"}
    answer = expect(client.post("/me/core-memories", json=body), status)
    assert isinstance(answer, dict)
    return answer


def replayed(server: Server, user: str) -> list[dict[str, object]]:
    with server.client("auditor-1", roles=["auditor"]) as auditor:
        answer = auditor.get("/audit/replay", params={"user": user})
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines() if line]


def test_an_erase_by_the_cli_is_final_for_the_running_server(
    server: Server, database_url: str, pg_schema: str, master_key: str
) -> None:
    with server.client("alice") as alice:
        create(alice, "seed", "the server now holds alice's own key")
        create(alice, "diet", "I am vegetarian")
        assert "vegetarian" in repr(replayed(server, "alice"))  # its key is cached too

        erase_with_the_cli(database_url, pg_schema, master_key, "alice")

        # Finding 2: replay on the server shows no content of the erased memories.
        events = replayed(server, "alice")
        assert "vegetarian" not in repr(events)
        assert all(e["redacted"] for e in events if e["event_type"] == "memory.created")

        # Finding 1: one key, one memory, whatever the server had cached.
        first = create(alice, "dup_key", "I am vegetarian")
        taken = alice.post(
            "/me/core-memories",
            json={
                "memory_key": "dup_key",
                "content": "I eat steak every day",
                "category": "fact",
                "scope_type": "global",
            },
        )
        assert taken.status_code == 409, taken.text
        assert taken.json()["reason"] == "key_exists"
        assert taken.json()["memory_id"] == first["memory_id"]
        listed = expect(alice.get("/me/memories"), 200)
        assert [m["memory_key"] for m in listed].count("dup_key") == 1

    with server.client("alice", workspace="learning") as agent:
        saved = expect(
            agent.post(
                "/tools/save_core_memory",
                json={
                    "memory_key": "dup_key",
                    "content": "I eat steak every day",
                    "category": "fact",
                    "scope_type": "global",
                },
            ),
            200,
        )
        assert saved["status"] == "candidate_created"  # never a second memory beside it

    with server.client("alice") as alice:
        expect(alice.delete("/me/memories/dup_key"), 204)
        listed = expect(alice.get("/me/memories"), 200)
        assert "dup_key" not in [m["memory_key"] for m in listed]
    server.process.terminate()
    server.process.wait(timeout=30)
    projections_rebuilt(database_url, pg_schema, master_key)


def test_a_forget_by_another_replica_is_final_for_the_server(
    server: Server, make_ledger: Callable[..., MemoryLedger]
) -> None:
    with server.client("bob") as bob:
        memory = create(bob, "diet", "I am vegetarian", 201)
        assert "vegetarian" in repr(replayed(server, "bob"))
        make_ledger().forget_memory("bob", UUID(str(memory["memory_id"])))  # replica B
        events = replayed(server, "bob")
        assert "vegetarian" not in repr(events)
        assert any(e["event_type"] == "memory.deleted" for e in events)
