"""uvicorn's h11 protocol with the connection bounds uvicorn lacks: idle, head and body times.

uvicorn (0.55) closes a kept-alive connection idle after a response (`timeout_keep_alive`),
but has no bound on a connection that sends nothing after connecting, nor on one trickling
its request head or body a byte at a time: such connections stay open until the file
descriptor limit (issue 22, finding 6). This subclass adds one timer per connection:

- idle: from the connection's start until its first byte (`idle` seconds; uvicorn's own
  `timeout_keep_alive`, set to the same value, covers the idle time between requests);
- head: from a request head's first byte until the head is complete (`head` seconds);
- body: from the end of the head until the end of the body (`body` seconds).

Past it the connection is closed. While the application works on a request there is no timer
here: MEMLEDGER_REQUEST_DEADLINE answers it (api/deadline.py). It also counts connections: one
opened while `max_connections` are open already is marked in its requests' ASGI state
(`OVER_CAPACITY`), and `Admission` (api/middleware.py) answers them 503 with Retry-After and
closes it.

Why a subclass: uvicorn's documented `http=` option takes a protocol class, and the bounds need
the HTTP parser's state, which only the protocol sees. What it relies on beyond that option —
the constructor uvicorn calls, the `connection_made` / `data_received` / `connection_lost`
hooks, the `conn` (an h11.Connection, read through h11's public `their_state`), `transport`,
`loop` and `connections` attributes, and that the `app_state` it is given is what each request's
ASGI state is copied from — is pinned by tests/api/test_http_protocol.py; the fault
suite checks the behaviour against a real server (tests/faults/test_connection_bounds.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from api.middleware import OVER_CAPACITY

__all__ = ["bounded_protocol"]

_log = logging.getLogger("memledger.http")


def bounded_protocol(
    *, idle: float, head: float, body: float, max_connections: int
) -> type[asyncio.Protocol]:
    """The protocol class to give uvicorn (`http=`), with these bounds in seconds."""

    class Bounded(_BoundedH11):
        bounds = (idle, head, body)
        connection_limit = max_connections

    return Bounded


class _BoundedH11(H11Protocol):
    bounds: tuple[float, float, float] = (5.0, 5.0, 10.0)
    connection_limit: int = 0

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # A dict of this connection's own: uvicorn copies it into each request's ASGI state.
        self._state = dict(app_state)
        super().__init__(config, server_state, self._state, _loop)
        self._phase = "idle"
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # now among the open connections
        if self.connection_limit and len(self.connections) > self.connection_limit:
            self._state[OVER_CAPACITY] = True
        self._arm("idle", self.bounds[0])

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.IDLE:  # a head begun, not complete
            if self._phase != "head":
                self._arm("head", self.bounds[1])
        elif state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", self.bounds[2])
        else:  # the request is in (or the connection is ending): the application's time
            self._disarm("app")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm("closed")
        super().connection_lost(exc)

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm(phase)
        self._timer = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _disarm(self, phase: str) -> None:
        self._phase = phase
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self, phase: str, seconds: float) -> None:
        self._timer = None
        if self._phase != phase or self.transport.is_closing():
            return
        if phase != "idle":
            _log.info(
                "connection closed: request %s not received within %gs",
                phase,
                seconds,
                extra={"client": ":".join(map(str, self.client or ()))},
            )
        self.transport.close()
