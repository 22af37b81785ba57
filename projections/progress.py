"""Read-your-writes: waiting until projections reach a position of one ledger partition.

A worker notes each (projection, partition) position it commits (`committed`); a read that
needs a position waits for those notes when this process applies the partition, and otherwise
polls the tracking table, less often the longer it takes, since another process (the one
holding the partition's lease, projections/leases.py) applies it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from domain.ledger.positions import local_of, partition_of

__all__ = ["Progress"]

Positions = Callable[[], dict[tuple[str, int], int]]
"""Every (projection, partition)'s stored position (the tracking table, read now)."""


class Progress:
    """What this process committed, and the waits of reads on it or on the tracking table."""

    def __init__(self, stored: Positions) -> None:
        self._stored = stored
        self._committed: dict[tuple[str, int], int] = {}
        self._changed = threading.Condition()

    def committed(self, name: str, partition: int, local: int) -> None:
        """This process committed the projection in the partition up to `local`."""
        key = (name, partition)
        with self._changed:  # a read waiting for this projection alone goes on now
            self._committed[key] = max(self._committed.get(key, 0), local)
            self._changed.notify_all()

    def moved(self) -> None:
        """Something was committed: waiting reads look again."""
        with self._changed:
            self._changed.notify_all()

    def wait(self, names: Sequence[str], position: int, timeout: float) -> bool:
        """Block until the projections named reached `position` (in its partition); False
        on timeout."""
        partition, local = partition_of(position), local_of(position)
        wanted = [(name, partition) for name in names]
        if not local or self._reached(wanted, local):
            return True  # this process committed them that far: no query needed
        deadline = time.monotonic() + timeout
        poll, next_poll = 0.05, 0.0  # this process's commits wake it; others' are polled
        while True:
            now = time.monotonic()
            if now >= next_poll:
                positions = self._stored()
                if min((positions.get(key, 0) for key in wanted), default=local) >= local:
                    return True
                # Polled less often the longer it takes: many waiting requests must not keep
                # the read pool (and the CPU) busy while the projections are held up.
                next_poll, poll = now + poll, min(0.4, poll * 2)
            remaining = deadline - now
            if remaining <= 0:
                return False
            with self._changed:  # each projection's commit wakes it: checked, no query
                if self._reached(wanted, local):
                    return True
                self._changed.wait(min(remaining, next_poll - now))

    def _reached(self, keys: Sequence[tuple[str, int]], local: int) -> bool:
        return all(self._committed.get(key, 0) >= local for key in keys)
