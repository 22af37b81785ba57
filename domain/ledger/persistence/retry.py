"""`on_outage`: a call retried while the database is briefly unreachable, within the deadline.

As eventsourcing's `retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)`,
except that no new attempt starts when the caller's deadline (domain/deadline.py) would pass
during the wait: a request answers 503 in time rather than retrying past it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any, Final, TypeVar, cast

from eventsourcing.persistence import InterfaceError, OperationalError

from domain import deadline

__all__ = ["ATTEMPTS", "WAIT", "on_outage"]

ATTEMPTS: Final = 10
WAIT: Final = 0.2
"""Seconds between attempts: a dropped connection is discarded by the pool meanwhile."""

F = TypeVar("F", bound=Callable[..., Any])


def on_outage(func: F) -> F:
    """`func` tried up to ATTEMPTS times on InterfaceError and OperationalError."""

    @wraps(func)
    def retried(*args: Any, **kwargs: Any) -> Any:
        attempt = 1
        while True:
            try:
                return func(*args, **kwargs)
            except (InterfaceError, OperationalError):
                left = deadline.remaining()
                if attempt >= ATTEMPTS or (left is not None and left <= WAIT):
                    raise
            attempt += 1
            time.sleep(WAIT)

    return cast(F, retried)
