"""MCP over Streamable HTTP at /mcp, in the API's own app.

Stateless, with JSON responses: each POST carries its own bearer token and is answered on its
own, so nothing lives between requests and any worker or replica can answer. A request without
a valid token is refused with the API's 401 before any MCP message is read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.mcp.server import Turn, tools_server
from api.tokens import InvalidToken, verify_token
from domain.errors import LedgerUnavailable
from service.caller import Identity

__all__ = ["McpEndpoint", "mount_mcp", "request_turn"]


def mount_mcp(app: FastAPI, path: str = "/mcp") -> None:
    """Serve the agent tools over MCP at `path` of `app`, started and stopped with it."""
    endpoint = McpEndpoint(tools_server(request_turn))
    app.router.routes.append(Route(path, endpoint, include_in_schema=False))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), outer(running) as state:
            yield state

    app.router.lifespan_context = lifespan


class McpEndpoint:
    """The ASGI endpoint: checks the bearer token, then hands the request to the MCP SDK."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Accept requests while inside (a manager serves one app run only: a new one each)."""
        manager = StreamableHTTPSessionManager(self.server, stateless=True, json_response=True)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scheme, _, token = (Headers(scope=scope).get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise InvalidToken("no bearer token")  # answered by api/errors.py: 401
        services = scope["app"].state.services
        identity = verify_token(token.strip(), services.jwt_secret, services.max_token_lifetime)
        state = scope.setdefault("state", {})
        state["user_id"] = identity.user_id  # for the access log
        state["identity"] = identity  # for the tool calls (`request_turn`)
        if scope["method"] != "POST":
            # Stateless: no session to DELETE, and no server-initiated messages, so no GET
            # stream (which would hold a connection open for nothing); 405 says so (the spec's).
            refusal = JSONResponse(
                {"detail": "this MCP endpoint takes POST only"},
                status_code=405,
                headers={"Allow": "POST"},
            )
            await refusal(scope, receive, send)
            return
        if self._manager is None:  # the app is not running (its lifespan was not entered)
            raise LedgerUnavailable("the MCP endpoint is not started")
        await self._manager.handle_request(scope, receive, send)


def request_turn(ctx: ServerRequestContext[Any, Any]) -> Turn:
    """The turn of an MCP request: the app's services, the caller its token names (checked by
    `McpEndpoint`), and its X-Min-Position (so a read over MCP waits as over HTTP)."""
    request = ctx.request
    if request is None:  # not over HTTP: never served by this endpoint
        raise InvalidToken("no HTTP request")
    identity: Identity = request.scope["state"]["identity"]
    return Turn(
        request.app.state.services,
        lambda: identity,
        request.headers.get("x-min-position"),
    )
