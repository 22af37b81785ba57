"""Waking the projection workers after saves, outside the saves' transactions.

PostgreSQL serialises the commits of every transaction that sent a NOTIFY (one lock per
database, held through the commit and its WAL flush): a NOTIFY inside each save would make
saves of different partitions commit one at a time again. So a save only calls `notify()`
after its commit, and one thread per process sends the NOTIFY, in a transaction of its own
that writes nothing: saves committed meanwhile share one note. A worker that misses a note
(its connection dropped) still looks again after its idle wait. `close` (the ledger closing)
sends a last note and ends the thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from psycopg.sql import SQL, Identifier

from domain.ledger.persistence.pool import with_connection

__all__ = ["Notifier"]

_log = logging.getLogger(__name__)


class Notifier:
    """Sends `NOTIFY channel` soon after `notify()` is called, once for many calls."""

    def __init__(self, datastore: Any, channel: str) -> None:
        self._datastore = datastore
        self._statement = SQL("NOTIFY {}").format(Identifier(channel))
        self._due = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing = False

    def notify(self) -> None:
        """Have a note sent (after the caller's commit: the workers read what it committed)."""
        self._due.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="ledger-notifier", daemon=True
                    )
                    self._thread.start()

    def close(self, timeout: float = 1.0) -> None:
        """Send what is due and end the thread (before the ledger's pool closes)."""
        with self._lock:
            thread, self._closing = self._thread, True
        if thread is not None:
            self._due.set()
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()  # saves committed from here on are covered by the next note
            if self._datastore.pool.closed:  # the ledger was closed: nobody to wake
                with self._lock:
                    self._thread = None
                return
            try:
                with_connection(self._datastore, lambda conn: conn.execute(self._statement))
            except Exception:  # the workers look again after their idle wait
                _log.debug("could not notify the projection workers", exc_info=True)
            if self._closing:
                with self._lock:
                    self._thread = None
                return
