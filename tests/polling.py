"""Polling a background effect (a worker's, a listener's): a bound on waiting, never a timing
assertion."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["until"]


def until(condition: Callable[[], bool], seconds: float = 20.0, step: float = 0.05) -> bool:
    """True once `condition()` holds, polled every `step` for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()
