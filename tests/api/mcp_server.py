"""Test helpers: the app served by uvicorn on a loopback port, and MCP clients of it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import httpx2
import uvicorn
from fastapi import FastAPI
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

__all__ = ["mcp_session", "result_of", "serving"]

T = TypeVar("T")


@contextmanager
def serving(app: FastAPI, timeout: float = 30.0) -> Iterator[str]:
    """`app` served on a free loopback port (lifespan included) until the block ends; its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)


def mcp_session(
    url: str,
    token: str | None,
    run: Callable[[Client], Awaitable[T]],
    *,
    mode: str = "auto",
    request_id: str | None = None,
) -> T:
    """Connect the official MCP client to `url`/mcp with `token`, and run `run` with it."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if request_id:
        headers["X-Request-ID"] = request_id

    async def main() -> T:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30.0, trust_env=False) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
        ):
            return await run(client)

    return anyio.run(main)


def result_of(result: CallToolResult) -> tuple[bool, Any]:
    """(is_error, structured content) of a tool result; its text is the same JSON."""
    assert len(result.content) == 1 and result.content[0].type == "text"
    assert json.loads(result.content[0].text) == result.structured_content
    return result.is_error, result.structured_content
