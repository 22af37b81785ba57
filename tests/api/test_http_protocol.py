"""Pins what api/http_protocol.py relies on in uvicorn beyond its documented `http=` option: the
protocol's constructor and hooks, its `conn` (h11), `transport`, `loop` and `connections`
attributes, and that each request's ASGI state is copied from the `app_state` it was given.
An upgrade of uvicorn that changes any of them fails here, not in production."""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from api.http_protocol import bounded_protocol
from api.middleware import OVER_CAPACITY


class Transport(asyncio.Transport):
    """Enough of a socket transport for the protocol: records writes and the close."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def run(limit: int, *chunks: bytes, idle: float = 30.0) -> tuple[Any, Transport, list[Any]]:
    """A protocol fed `chunks`, with the scopes its application saw."""
    scopes: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scopes.append(scope)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def scenario() -> tuple[Any, Transport]:
        config = Config(app, log_config=None, lifespan="off", ws="none")
        config.load()
        state = ServerState()
        cls = bounded_protocol(idle=idle, head=30.0, body=30.0, max_connections=limit)
        assert issubclass(cls, H11Protocol)
        other = cls(config=config, server_state=state, app_state={"from": "lifespan"})
        other.connection_made(Transport())  # type: ignore[attr-defined]
        protocol = cls(config=config, server_state=state, app_state={"from": "lifespan"})
        transport = Transport()
        protocol.connection_made(transport)  # type: ignore[attr-defined]
        assert protocol in protocol.connections  # type: ignore[attr-defined]
        assert isinstance(protocol.conn, h11.Connection)  # type: ignore[attr-defined]
        assert protocol.loop is asyncio.get_running_loop()  # type: ignore[attr-defined]
        for chunk in chunks:
            protocol.data_received(chunk)  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        return protocol, transport

    protocol, transport = asyncio.run(scenario())
    return protocol, transport, scopes


def test_the_parser_state_drives_the_phases_and_the_state_reaches_each_request() -> None:
    _, transport, scopes = run(
        0,
        b"POST / HTTP/1.1\r\nHost: x\r\n",
        b"Content-Length: 2\r\n\r\n",
        b"{}",
    )
    assert scopes and scopes[0]["state"] == {"from": "lifespan"}
    assert b"204" in transport.written and not transport.closed


def test_a_head_in_progress_and_a_body_in_progress_are_seen_as_such() -> None:
    protocol, _, _ = run(0, b"GET / HTTP/1.1\r\nHost:")
    assert protocol.conn.their_state is h11.IDLE and protocol._phase == "head"
    protocol, _, _ = run(0, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{")
    assert protocol.conn.their_state is h11.SEND_BODY and protocol._phase == "body"


def test_an_idle_connection_is_closed_by_its_timer() -> None:
    _, transport, _ = run(0, idle=0.01)
    assert transport.closed


def test_a_connection_past_the_limit_is_marked_in_its_requests_state() -> None:
    _, _, scopes = run(1, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert scopes and scopes[0]["state"][OVER_CAPACITY] is True
    _, _, scopes = run(2, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert OVER_CAPACITY not in scopes[0]["state"]
