"""Polling a background effect (a worker's, a listener's): a bound on waiting, never a timing
assertion."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["caught_up", "until"]


def until(condition: Callable[[], bool], seconds: float = 20.0, step: float = 0.05) -> bool:
    """True once `condition()` holds, polled every `step` for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def caught_up(worker: Any, ledger: Any, seconds: float = 30.0) -> bool:
    """True once `worker`'s projections reached the head of every ledger partition (as it is
    when called), waiting at most `seconds` in all (`ProjectionWorker.wait_all`)."""
    return bool(worker.wait_all(seconds))
