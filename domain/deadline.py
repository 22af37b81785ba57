"""The time left to the caller waiting for this work (a request's deadline), if any.

    with within(8.0):          # the API, around each request
        ...                    # pools wait at most `remaining()` for a connection,
                               # retries stop once `expired()`

Outside any `within` block (workers, CLI commands) there is no deadline: `remaining()` is None
and nothing is cut short. The deadline follows the context into worker threads
(`asyncio.to_thread` and the request thread pool copy it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["expired", "remaining", "within"]

_DEADLINE: ContextVar[float | None] = ContextVar("memledger_deadline", default=None)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Give the work inside the block `seconds` at most (an enclosing, earlier one stays)."""
    at = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(outer, at))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left (0.0 once passed), or None when no deadline is set."""
    at = _DEADLINE.get()
    return None if at is None else max(0.0, at - time.monotonic())


def expired() -> bool:
    """True once the deadline has passed (never without one)."""
    left = remaining()
    return left is not None and left <= 0.0
