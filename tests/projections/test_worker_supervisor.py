"""The worker's restart back-off: doubles up to its cap while restarts fail, and starts again
from the shortest wait once the worker has caught up."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

from projections.worker import ProjectionWorker


def test_the_restart_wait_doubles_to_its_cap_and_resets_after_catching_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = MagicMock()  # never read: `_follow` below stands in for the database
    worker = ProjectionWorker(ledger, None, "supervisor_test", [], max_restart_wait=0.4)  # type: ignore[arg-type]
    runs = iter([False, False, False, False, True, False])  # True: caught up, then failed
    waits: list[float] = []

    def follow() -> None:
        caught_up = next(runs, None)
        if caught_up is None:
            worker._stop.set()
        elif caught_up:
            worker._caught_up = True
        raise RuntimeError("the database went away")

    def wait(timeout: Any) -> bool:
        waits.append(timeout)
        return worker._stop.is_set()

    monkeypatch.setattr(worker, "_follow", follow)
    monkeypatch.setattr(worker._stop, "wait", wait)
    worker.run()
    assert waits == [0.1, 0.2, 0.4, 0.4, 0.1, 0.2, 0.4]
