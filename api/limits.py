"""Per-user concurrency: one user's burst is refused with 429 before it slows anyone else.

Every authenticated request holds one of its user's (the token's `sub`) `requests` slots
while its route runs (MEMLEDGER_USER_CONCURRENCY; taken by the identity dependency in
api/deps.py, or by an MCP tool call, and released when the route or call returns, before a
streamed body is sent); a search (service/tool_reads.py) also holds one of the user's
`searches` slots (MEMLEDGER_USER_SEARCH_CONCURRENCY), searches being the CPU-heavy call; a
change-feed stream (`GET /me/changes` as Server-Sent Events) holds one of the user's `streams`
slots (MEMLEDGER_USER_STREAMS) while it is open, not a request slot. A
request finding its user's slots all taken is refused at once with
`UserBusy`, answered 429 with Retry-After by api/errors.py: nothing waits, so a user who
floods the service fills no queue and no thread, and other users' requests are served as
before. Limits count requests in this process (each replica counts its own).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, Literal

__all__ = ["SEARCHES", "STREAMS", "USER_REQUESTS", "Kind", "UserBusy", "UserLimits"]

USER_REQUESTS: Final = 8
"""Default requests one user may have in flight at once (MEMLEDGER_USER_CONCURRENCY)."""
SEARCHES: Final = 1
"""Default searches one user may have in flight at once (MEMLEDGER_USER_SEARCH_CONCURRENCY)."""

STREAMS: Final = 4
"""Default change-feed streams one user may hold open at once (MEMLEDGER_USER_STREAMS)."""

Kind = Literal["request", "search", "stream"]


class UserBusy(Exception):
    """The caller already has `limit` requests of this kind in flight (HTTP 429)."""

    def __init__(self, kind: Kind, limit: int) -> None:
        what = {"request": "requests", "search": "searches", "stream": "change-feed streams"}[kind]
        super().__init__(
            f"too many concurrent {what}: at most {limit} at once per user; retry after the"
            " others are answered"
        )
        self.kind = kind
        self.limit = limit


class UserLimits:
    """In-flight counters per user and kind, thread-safe; 0 turns a kind's limit off."""

    def __init__(
        self, requests: int = USER_REQUESTS, searches: int = SEARCHES, streams: int = STREAMS
    ) -> None:
        if min(requests, searches, streams) < 0:
            raise ValueError("per-user limits are counts of requests (0: no limit)")
        self.limits: dict[Kind, int] = {"request": requests, "search": searches, "stream": streams}
        self._held: dict[tuple[Kind, str], int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, user: str, kind: Kind = "request") -> Iterator[None]:
        """Hold a slot of `user`'s while inside; UserBusy at once when none is free."""
        limit = self.limits[kind]
        if not limit:
            yield
            return
        key = (kind, user)
        with self._lock:
            held = self._held.get(key, 0)
            if held >= limit:
                raise UserBusy(kind, limit)
            self._held[key] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[key] - 1
                if left:
                    self._held[key] = left
                else:
                    del self._held[key]  # idle users take no room

    def in_flight(self, user: str, kind: Kind = "request") -> int:
        """The user's requests of this kind in flight now."""
        with self._lock:
            return self._held.get((kind, user), 0)
