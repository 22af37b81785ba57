"""The agent tools over stdio: `run_stdio` in a process of its own, its token from
MEMLEDGER_TOKEN, driven by the official `mcp` client's stdio transport."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from api.schemas.tools import tool_specs
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from tests.api.mcp_server import result_of
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

SECRET = "stdio-secret-of-at-least-32-bytes-long!"
RUN = "from api.mcp import run_stdio; raise SystemExit(run_stdio())"
T = TypeVar("T")


@pytest.fixture
def environment(database_url: str, pg_schema: str, master_key: str, tmp_path: Path) -> dict:
    return {
        "PYTHONPATH": str(REPO_ROOT),
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": pg_schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_JWT_SECRET": SECRET,
        "MEMLEDGER_DATA_DIR": str(tmp_path / "data"),
        "MEMLEDGER_EMBEDDER": "off",  # lexical search: no model to load in the child
    }


def over_stdio(
    environment: dict[str, str], bearer: str, log: Path, run: Callable[[Client], Awaitable[T]]
) -> T:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", RUN],
        env=environment | {"MEMLEDGER_TOKEN": bearer},
        cwd=str(log.parent),
    )

    async def main() -> T:
        with log.open("a") as errors:
            async with Client(stdio_client(params, errlog=errors), mode="legacy") as client:
                return await run(client)

    try:
        return anyio.run(main)
    except BaseException:
        print(log.read_text(errors="replace")[-4000:])  # the server's stderr, on failure
        raise


def test_the_tools_over_stdio_act_with_the_environments_token(
    environment: dict[str, str], tmp_path: Path, ledger: MemoryLedger
) -> None:
    async def run(client: Client) -> Any:
        tools = (await client.list_tools()).tools
        saved = result_of(
            await client.call_tool(
                "save_core_memory",
                {
                    "memory_key": "style",
                    "content": "I prefer worked examples",
                    "category": "preference",
                    "scope_type": "workspace",
                },
            )
        )
        found = result_of(await client.call_tool("search_core_memories", {"query": "examples"}))
        return tools, saved, found

    bearer = mint_token(SECRET, "alice", workspace="research")
    tools, (failed, saved), (_, found) = over_stdio(environment, bearer, tmp_path / "log", run)

    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (s.name, s.description, s.input_schema) for s in tool_specs()
    ]
    assert not failed and saved["status"] == "created"
    assert saved["memory"]["workspace_type"] == "research"  # the token's workspace
    assert [i["memory_id"] for i in found["items"]] == [saved["memory"]["memory_id"]]
    stored = ledger.get_memory("alice", saved["memory"]["memory_id"])
    assert (stored.content, stored.workspace_type) == ("I prefer worked examples", "research")


def test_a_denial_over_stdio_is_a_tool_error_with_the_reason(
    environment: dict[str, str], tmp_path: Path
) -> None:
    async def run(client: Client) -> Any:
        return result_of(await client.call_tool("list_core_memories", {}))

    bearer = mint_token(SECRET, "alice", workspace="learning", mode="isolated")
    failed, error = over_stdio(environment, bearer, tmp_path / "log", run)

    assert failed and (error["status"], error["reason"]) == (403, "isolated_mode")


@pytest.mark.parametrize(
    ("bearer", "said"),
    [
        (None, "MEMLEDGER_TOKEN (an agent-turn bearer token) is required"),
        ("not-a-token", "MEMLEDGER_TOKEN is not a valid token"),
        (mint_token("another-secret-of-32-bytes-or-more!!", "alice"), "not a valid token"),
    ],
)
def test_without_a_valid_token_it_refuses_to_start(
    environment: dict[str, str], tmp_path: Path, bearer: str | None, said: str
) -> None:
    env = environment | ({"MEMLEDGER_TOKEN": bearer} if bearer else {})
    done = subprocess.run(
        [sys.executable, "-c", RUN],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 2
    assert said in done.stderr
    assert done.stdout == ""  # stdout is the protocol's: nothing else is ever written there
