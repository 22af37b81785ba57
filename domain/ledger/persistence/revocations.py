"""Following the key-revocation channel: keys another process destroyed are dropped here at once.

Every shredding transaction announces the ids of the keys it deletes on its schema's
revocation channel (`LedgerRecorder`, with `pg_notify` in the transaction: delivered at commit,
never for a rollback), or `EVERY_KEY` when it deletes keys it does not name by id (a memory's
and its candidates', a user's: every cached key is dropped). `RevocationListener` holds one
connection of its own that LISTENs on it, in a daemon thread, and hands each note's ids to
`revoked`. A note sent while nobody listened is not heard, so the listener calls `untrusted`
before it listens (and whenever its connection is lost) and `trusted` once it listens again:
the key store trusts no cached key meanwhile.

`stop` wakes the listener with a note of no ids (an empty payload, ignored by every listener)
so that closing a ledger does not wait out the listener's one-second poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol
from uuid import UUID

import psycopg
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Identifier

from domain.ledger.persistence.pool import with_connection

__all__ = ["EVERY_KEY", "Revocable", "RevocationListener", "parse_note"]

EVERY_KEY = "*"
"""The note of a transaction that destroyed keys not named by id (a forgotten memory's and
those of candidates about it, an erased user's): every cached key is dropped."""


class Revocable(Protocol):
    """What follows the notes: the key store (domain/ledger/keystore.py)."""

    def revoked(self, key_ids: Iterable[UUID]) -> None: ...
    def trusted(self) -> None: ...
    def untrusted(self) -> None: ...


_log = logging.getLogger(__name__)


def parse_note(payload: str) -> list[UUID]:
    """The key ids of one revocation note (comma-separated); malformed ids are skipped."""
    ids = []
    for part in payload.split(","):
        try:
            ids.append(UUID(part))
        except ValueError:
            _log.warning("a key-revocation note held something that is not a key id")
    return ids


class RevocationListener:
    """LISTENs on a revocation channel in a daemon thread until `stop`.

    `revoked(ids)` runs for every note; `untrusted()` when the listener is not (yet, or any
    more) listening, `trusted()` once it listens. A lost connection is retried with back-off
    (0.1 s doubling to `max_backoff`).
    """

    def __init__(
        self,
        conninfo: str | Callable[[], str],
        connect_kwargs: Mapping[str, Any] | Callable[[], Mapping[str, Any] | None] | None,
        channel: str,
        *,
        revoked: Callable[[Iterable[UUID]], None],
        trusted: Callable[[], None],
        untrusted: Callable[[], None],
        max_backoff: float = 5.0,
        wake: Callable[[], object] | None = None,
    ) -> None:
        self.channel = channel
        self._conninfo = conninfo
        self._connect_kwargs = connect_kwargs
        self._revoked, self._trusted, self._untrusted = revoked, trusted, untrusted
        self._max_backoff = max_backoff
        self._wake = wake
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of(cls, datastore: PostgresDatastore, channel: str, keys: Revocable) -> RevocationListener:
        """A listener on the datastore's database (its pool's public connection settings)."""
        pool = datastore.pool
        wake = SQL("NOTIFY {}").format(Identifier(channel))
        return cls(
            pool.conninfo,
            pool.kwargs,
            channel,
            revoked=keys.revoked,
            trusted=keys.trusted,
            untrusted=keys.untrusted,
            wake=lambda: with_connection(datastore, lambda conn: conn.execute(wake)),
        )

    @property
    def listening(self) -> bool:
        """True while the listener LISTENs (notes are heard)."""
        return self._listening.is_set()

    def start(self, wait: float = 5.0) -> bool:
        """Start following; waits up to `wait` seconds for it to listen (True if it does)."""
        self._untrusted()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="key-revocations", daemon=True)
        self._thread.start()
        return self._listening.wait(wait)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening: woken by an empty note, the thread ends at once (within its
        one-second poll when the note cannot be sent)."""
        self._stop.set()
        if self._thread is not None:
            if self._wake is not None and self._listening.is_set():
                try:
                    self._wake()
                except Exception:  # the poll's timeout ends it instead
                    _log.debug("could not wake the key-revocation listener", exc_info=True)
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self._follow()
                return
            except psycopg.Error as error:
                if self._listening.is_set():
                    backoff = 0.1
                self._listening.clear()
                self._untrusted()
                _log.warning(
                    "key-revocation listener lost its connection (%s); cached keys are not"
                    " trusted until it listens again, in %.1fs",
                    type(error).__name__,
                    backoff,
                )
                self._stop.wait(backoff)
                backoff = min(self._max_backoff, backoff * 2)

    def _follow(self) -> None:
        # Resolved at each connection, as the pool resolves them (either may be a callable).
        conninfo = self._conninfo() if callable(self._conninfo) else self._conninfo
        given = self._connect_kwargs() if callable(self._connect_kwargs) else self._connect_kwargs
        kwargs = {**(given or {}), "autocommit": True}
        with psycopg.connect(conninfo, **kwargs) as conn:
            conn.execute(SQL("LISTEN {}").format(Identifier(self.channel)))
            self._trusted()  # before `listening` is set: what was cached unheard is dropped
            self._listening.set()
            while not self._stop.is_set():
                for note in conn.notifies(timeout=1.0):
                    if not note.payload:
                        pass  # a listener being stopped woke itself: nothing is revoked
                    elif note.payload == EVERY_KEY:
                        # Nothing cached is kept: as when the listener was not listening.
                        self._untrusted()
                        self._trusted()
                    else:
                        self._revoked(parse_note(note.payload))
                    if self._stop.is_set():
                        break
        self._listening.clear()
