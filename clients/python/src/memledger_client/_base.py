"""What the sync and async clients share: settings, headers, read-your-writes, decoding."""

from __future__ import annotations

import re
import threading
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol, TypeVar

import httpx2

from memledger_client._calls import Call
from memledger_client._retry import Retries

__all__ = ["DEFAULT_TIMEOUT", "STREAM_READ_TIMEOUT", "AsyncSender", "ClientBase", "Sender"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds per request; above the server's request deadline, so its 503 arrives first."""
STREAM_READ_TIMEOUT = 45.0
"""Seconds a change stream may stay silent (the server sends a heartbeat every 15 s)."""
USER_AGENT = "memledger-client/0.1"


class Sender(Protocol):
    """What `MemLedger` offers its namespaces (`tools`, `audit`): sending a call."""

    def _send(self, call: Call[T]) -> T: ...

    def _stream(
        self, call: Call[Any], headers: dict[str, str], read_timeout: float | None
    ) -> AbstractContextManager[httpx2.Response]: ...


class AsyncSender(Protocol):
    """What `AsyncMemLedger` offers its namespaces: sending a call, awaited."""

    async def _send(self, call: Call[T]) -> T: ...

    def _stream(
        self, call: Call[Any], headers: dict[str, str], read_timeout: float | None
    ) -> AbstractAsyncContextManager[httpx2.Response]: ...


class ClientBase:
    """Settings and per-client state; the clients add the sending."""

    def __init__(self, token: str, *, retries: Retries | None, read_your_writes: bool) -> None:
        if not token:
            raise ValueError("a bearer token is required (a user token or an agent token)")
        self.retries = retries or Retries()
        self.read_your_writes = read_your_writes
        """Send the last write's position as `X-Min-Position` (see `position`)."""
        self._token = token
        self._position: str | None = None
        self._lock = threading.Lock()

    @property
    def position(self) -> str | None:
        """The `X-Position` of the latest write this client made (None before any).

        While `read_your_writes` is on, every request carries it as `X-Min-Position`, so a
        read shows that write even when another server process answers it. Set it to carry a
        position over from another client (or process); set None to forget it.
        """
        return self._position

    @position.setter
    def position(self, value: str | None) -> None:
        with self._lock:
            self._position = value

    def _note_position(self, response: httpx2.Response) -> None:
        value = response.headers.get("X-Position")
        if value is None:
            return
        with self._lock:
            if self._position is None or not _older(value, self._position):
                self._position = value

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self._token}", "User-Agent": USER_AGENT}
        position = self._position
        if self.read_your_writes and position is not None:
            headers["X-Min-Position"] = position
        return headers | (extra or {})

    def _build(
        self,
        http: httpx2.Client | httpx2.AsyncClient,
        call: Call[Any],
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
    ) -> httpx2.Request:
        return http.build_request(
            call.method,
            call.path,
            params=dict(call.params) or None,
            json=call.body,
            headers=self._headers(headers),
            timeout=httpx2.USE_CLIENT_DEFAULT if timeout is None else timeout,
        )

    def _result(self, call: Call[T], response: httpx2.Response) -> T:
        """The decoded answer of a call that succeeded; remembers the write's position."""
        self._note_position(response)
        if not response.is_success:  # a repeated forget answering "already gone"
            return call.decode({"status": "forgotten"})
        if response.status_code == 204 or not response.content:
            return call.decode(None)
        return call.decode(response.json())


def _older(value: str, than: str) -> bool:
    # Positions are opaque, but two writes of one client may be answered out of order
    # (threads, gathered tasks): when both read as positions of one ledger partition (the
    # server's `p<partition>.<position>`, or a plain number from before partitions), keep the
    # later one.
    a, b = _TOKEN.fullmatch(value), _TOKEN.fullmatch(than)
    if a and b and a["partition"] == b["partition"]:
        return int(a["position"]) < int(b["position"])
    return False


_TOKEN = re.compile(r"(?:p(?P<partition>[0-9]+)\.)?(?P<position>[0-9]+)")
