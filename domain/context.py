"""What the caller's context carries into the work it asks for: its request id and its
deadline, and the retries bounded by that deadline.

    with correlated(request_id), within(8.0):   # the API, around each request
        ...                    # every event saved carries `current_request_id()`;
                               # pools wait at most `remaining()` for a connection,
                               # retries stop once `expired()`

Outside any `within` block (workers, CLI commands) there is no deadline: `remaining()` is None
and nothing is cut short. Both follow the context into worker threads (`asyncio.to_thread` and
the request thread pool copy it).

Two retries respect it, one per level:

- `on_outage` (persistence): a database call tried again while the database is briefly
  unreachable, as eventsourcing's `retry((InterfaceError, OperationalError), max_attempts=10,
  wait=0.2)`, except that no attempt starts when the deadline would pass during the wait;
- `retrying` (commands): a command body that raised `Retry` (it lost a race) runs again on
  fresh state; a database outage that persists becomes LedgerUnavailable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from typing import Any, Final, TypeVar, cast

from eventsourcing.persistence import InterfaceError, OperationalError

from domain.errors import LedgerUnavailable

__all__ = [
    "OUTAGE_ATTEMPTS",
    "OUTAGE_WAIT",
    "RACE_ATTEMPTS",
    "ClaimTaken",
    "Retry",
    "correlated",
    "current_request_id",
    "expired",
    "on_outage",
    "outage_unavailable",
    "remaining",
    "retrying",
    "within",
]

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


# -- persistence: through a brief outage ---------------------------------------------------------

OUTAGE_ATTEMPTS: Final = 10
OUTAGE_WAIT: Final = 0.2
"""Seconds between attempts: a dropped connection is discarded by the pool meanwhile."""

F = TypeVar("F", bound=Callable[..., Any])


def on_outage(func: F) -> F:
    """`func` tried up to OUTAGE_ATTEMPTS times on InterfaceError and OperationalError."""

    @wraps(func)
    def retried(*args: Any, **kwargs: Any) -> Any:
        attempt = 1
        while True:
            try:
                return func(*args, **kwargs)
            except (InterfaceError, OperationalError):
                left = remaining()
                if attempt >= OUTAGE_ATTEMPTS or (left is not None and left <= OUTAGE_WAIT):
                    raise
            attempt += 1
            time.sleep(OUTAGE_WAIT)

    return cast(F, retried)


# -- commands: lost races ------------------------------------------------------------------------

T = TypeVar("T")

RACE_ATTEMPTS: Final = 8


class Retry(Exception):
    """A concurrent writer won a race; run the command body again on fresh state."""


class ClaimTaken(Retry):
    """The save lost on a key claim: another live memory holds the (user, scope, key)."""


@contextmanager
def outage_unavailable() -> Iterator[None]:
    """Raise the persistence errors of an unreachable database as LedgerUnavailable.

    Only OperationalError and InterfaceError (connection lost, server shutting down, pool
    timeout, lock or statement timeout): other persistence errors are bugs and pass unchanged.
    """
    try:
        yield
    except (OperationalError, InterfaceError) as error:
        raise LedgerUnavailable(f"database unavailable: {type(error).__name__}") from error


def retrying(body: Callable[[], T]) -> T:
    """Run a command body until it saves without losing a race (bounded: LedgerUnavailable,
    after RACE_ATTEMPTS or once the caller's deadline has passed)."""
    attempt = 1
    with outage_unavailable():
        while True:
            try:
                return body()
            except Retry as error:
                if attempt >= RACE_ATTEMPTS or expired():
                    raise LedgerUnavailable("too much contention on this memory; retry") from error
            attempt += 1
