"""An MCP tool call runs the tool's use case directly: it never crosses the HTTP app again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import httpx2
import pytest
from mcp.client import Client
from starlette.types import ASGIApp, Receive, Scope, Send

from api.app import create_app
from api.services import Services
from api.tokens import mint_token
from tests.api.mcp_server import mcp_session, result_of, serving
from tests.conftest import JWT_SECRET

pytestmark = pytest.mark.integration


class Paths:
    """An ASGI middleware recording the path of every HTTP request the app is asked."""

    seen: ClassVar[list[str]] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            Paths.seen.append(scope["path"])
        await self.app(scope, receive, send)


@pytest.fixture
def url(services: Services, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    def refused(*_: Any, **__: Any) -> None:
        raise AssertionError("an MCP tool call went through an in-process HTTP transport")

    monkeypatch.setattr(httpx2, "ASGITransport", refused)
    app = create_app(services)
    app.add_middleware(Paths)
    Paths.seen = []
    with serving(app) as base:
        yield base


def test_a_tool_call_over_mcp_is_one_http_request_to_mcp_and_none_to_the_tools(url: str) -> None:
    agent = mint_token(JWT_SECRET, "alice", workspace="learning")
    save = {"memory_key": "drink", "content": "I like green tea", "category": "preference"}

    async def run(client: Client) -> Any:
        Paths.seen.clear()
        saved = result_of(
            await client.call_tool("save_core_memory", save | {"scope_type": "global"})
        )
        found = result_of(await client.call_tool("search_core_memories", {"query": "green tea"}))
        return saved, found

    (failed, saved), (missed, found) = mcp_session(url, agent, run)

    assert not failed and saved["status"] == "created"
    assert not missed and [i["content"] for i in found["items"]] == ["I like green tea"]
    assert Paths.seen and set(Paths.seen) == {"/mcp"}  # no /tools/* request, nor any other
