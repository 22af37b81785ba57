"""The request id of the command being saved, carried into every event it records (for audit)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["correlated", "current_request_id"]

_REQUEST_ID: ContextVar[str | None] = ContextVar("memledger_request_id", default=None)


def current_request_id() -> str | None:
    """The request id set by the innermost `correlated` block, if any."""
    return _REQUEST_ID.get()


@contextmanager
def correlated(request_id: str | None) -> Iterator[None]:
    """Tag every event saved inside this block with `request_id` (stored in clear)."""
    token = _REQUEST_ID.set(request_id)
    try:
        yield
    finally:
        _REQUEST_ID.reset(token)
