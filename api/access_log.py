"""The access audit of section 17: reads, searches and denials, recorded off the hot path.

Recorded: what the agent tools return (search, list), what the management and legacy API
return to the user (list, get, versions: tool names `api.*`), and every policy denial.

A tool call only appends an `AccessEntry` to an in-memory queue (a lock and a list append, no
I/O). A background thread saves the queue to the ledger in batches, one transaction each
(`MemoryLedger.record_access`): after `interval` seconds, or sooner once `batch_size` entries
wait. The records become ledger events, so the audit projection and `GET /audit/events` show
them (`memory.read`, `memory.search`, `memory.policy_denied`) with the request id and user id in
clear, and never any content, key or query text.

`flush()` writes everything queued so far and returns once it is in the ledger (tests, and
shutdown: `close()` flushes, then stops the thread). Trade-offs, on purpose:

- A crash loses at most the entries of the last `interval` (the response did not wait).
- Should the ledger be unavailable, a batch is retried with back-off (`retries` times) and then
  dropped with an error log; `dropped` counts entries lost that way or because the queue was
  full (`max_queue`): auditing must never block or fail the tool call it describes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from domain.context import current_request_id
from domain.ledger.access import AccessEntry, AccessHit, denial_entry, result_entries
from domain.ledger.ledger import MemoryLedger

__all__ = ["AccessLog", "AccessLogState"]

_log = logging.getLogger("memledger.audit")
_BACKOFF: Final = (0.05, 0.25, 1.0, 2.0, 4.0)


@dataclass(frozen=True, slots=True)
class AccessLogState:
    """What the writer did so far: entries written, dropped, and queued but not yet written."""

    written: int
    dropped: int
    pending: int


class AccessLog:
    """A queue of access entries and the thread that appends them to the ledger in batches."""

    def __init__(
        self,
        ledger: MemoryLedger,
        *,
        batch_size: int = 500,
        interval: float = 0.2,
        max_queue: int = 100_000,
        retries: int = 3,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.ledger = ledger
        self.batch_size = batch_size
        self.interval = interval
        self.max_queue = max_queue
        self.retries = retries
        self.clock = clock or ledger.clock
        self.written = 0
        self.dropped = 0
        self._queue: deque[AccessEntry] = deque()
        self._queued = 0  # entries ever queued (or dropped at the door)
        self._done = 0  # entries written or given up on
        self._flush_to = 0
        self._closing = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    # -- recording (request threads) ---------------------------------------------------------

    def searched(self, user_id: str, tool: str, workspace: str, hits: Sequence[AccessHit]) -> None:
        """A search returned these memories (in rank order; none is recorded too)."""
        self._add(self._results("search", user_id, tool, workspace, hits))

    def read(
        self, user_id: str, tool: str, workspace: str | None, hits: Sequence[AccessHit]
    ) -> None:
        """A read tool (list) or a management read (`api.*`) returned these memories."""
        self._add(self._results("read", user_id, tool, workspace, hits))

    def denied(self, user_id: str, tool: str, workspace: str | None, reason: str) -> None:
        """The policy denied a tool call."""
        entry = denial_entry(
            user_id=user_id,
            tool=tool,
            workspace=workspace,
            request_id=current_request_id(),
            reason=reason,
            at=self.clock(),
        )
        self._add([entry])

    def _results(
        self, kind: str, user_id: str, tool: str, workspace: str | None, hits: Sequence[AccessHit]
    ) -> list[AccessEntry]:
        return result_entries(
            kind,
            user_id=user_id,
            tool=tool,
            workspace=workspace,
            request_id=current_request_id(),
            hits=hits,
            at=self.clock(),
        )

    def _add(self, entries: list[AccessEntry]) -> None:
        with self._cond:
            room = self.max_queue - len(self._queue)
            if room < len(entries):
                lost = len(entries) - max(room, 0)
                self.dropped += lost
                self._queued += lost
                self._done += lost
                entries = entries[: max(room, 0)]
                _log.error("access audit queue full: %d entries dropped", lost)
            idle = not self._queue  # the writer may be waiting for a first entry, untimed
            self._queue.extend(entries)
            self._queued += len(entries)
            if entries and (idle or len(self._queue) >= self.batch_size):
                self._cond.notify_all()
            self._ensure_thread()

    # -- lifecycle ---------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        """Start the writer thread on first use (and again after close). Holds the lock."""
        if self._thread is None or not self._thread.is_alive():
            self._closing = False
            self._thread = threading.Thread(target=self._run, name="access-audit", daemon=True)
            self._thread.start()

    def flush(self, timeout: float = 10.0) -> bool:
        """Write every entry queued before this call; False if that took longer than timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._queued
            if self._done >= target:
                return True
            self._flush_to = max(self._flush_to, target)
            self._ensure_thread()
            self._cond.notify_all()
            while self._done < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Flush, then stop the writer thread (recording again restarts it)."""
        if not self.flush(timeout):
            _log.error("access audit: %d entries not written at shutdown", self.pending)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    @property
    def pending(self) -> int:
        """Entries queued and not yet written (nor dropped)."""
        with self._cond:
            return self._queued - self._done

    def state(self) -> AccessLogState:
        """Counts for the metrics (`memledger_access_records_*`)."""
        with self._cond:  # a re-entrant lock: `pending` takes it again
            return AccessLogState(self.written, self.dropped, self.pending)

    # -- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, and nothing left
                # Linger a little so that one transaction carries many entries.
                self._cond.wait_for(
                    lambda: (
                        len(self._queue) >= self.batch_size
                        or self._flush_to > self._done
                        or self._closing
                    ),
                    timeout=self.interval,
                )
                batch = [
                    self._queue.popleft() for _ in range(min(self.batch_size, len(self._queue)))
                ]
            self._write(batch)
            with self._cond:
                self._done += len(batch)
                self._cond.notify_all()

    def _write(self, batch: list[AccessEntry]) -> None:
        for attempt in range(self.retries + 1):
            try:
                self.ledger.record_access(batch)
            except Exception as error:  # auditing must never kill its own thread
                if attempt == self.retries:
                    self.dropped += len(batch)
                    _log.error(
                        "access audit: %d entries dropped after %d attempts: %s",
                        len(batch),
                        attempt + 1,
                        type(error).__name__,
                    )
                    return
                time.sleep(_BACKOFF[min(attempt, len(_BACKOFF) - 1)])
            else:
                self.written += len(batch)
                return
