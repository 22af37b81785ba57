"""The per-user matrices kept in memory: bounded by bytes, valid for one `VectorKey` each.

A search looks its user's matrix up with the key it just read: an entry under another key is
dropped on the spot (the user's memories or vectors changed) once the search has read the
fresh matrix from it (`peek`: rows whose revision is unchanged keep their opened vector), so at
most one matrix per user and model is held. Entries not used for
`idle` seconds are dropped too (swept at every access), least recently used ones go first when
the bytes exceed `max_bytes`, and `evict(user)` drops a user's matrices at once (the embeddings
projection calls it on a forget: the forgotten vector goes at once). Vectors are personal data:
they are held here only, never logged or written anywhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from retrieval.vectors.matrix import UserVectors, VectorKey

__all__ = ["DEFAULT_IDLE", "DEFAULT_MAX_BYTES", "MatrixCache", "MatrixCacheState"]

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
"""About 16 users with 10,000 memories each (384-dimension float32 vectors)."""
DEFAULT_IDLE: Final = 600.0

_Slot = tuple[str, str, str]  # schema, user, model


@dataclass(frozen=True, slots=True)
class MatrixCacheState:
    """Figures for /metrics."""

    entries: int
    bytes: int
    hits: int
    loads: int


@dataclass(slots=True)
class _Entry:
    vectors: UserVectors
    used: float


class MatrixCache:
    """Thread-safe; `max_bytes` <= 0 turns it off (every search loads its matrix)."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        idle: float = DEFAULT_IDLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.idle = idle
        self.clock = clock
        self._entries: OrderedDict[_Slot, _Entry] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._loads = 0
        self._lock = threading.Lock()

    def get(self, schema: str, user_id: str, model: str, key: VectorKey) -> UserVectors | None:
        """The user's matrix if it was loaded under this very key (else None: load it)."""
        slot = (schema, user_id, model)
        with self._lock:
            self._sweep()
            entry = self._entries.get(slot)
            if entry is not None and entry.vectors.key.identity != key.identity:
                self._drop(slot)
                entry = None
            if entry is None:
                self._loads += 1
                return None
            entry.used = self.clock()
            self._entries.move_to_end(slot)
            self._hits += 1
            return entry.vectors

    def peek(self, schema: str, user_id: str, model: str) -> UserVectors | None:
        """The user's matrix whatever its key (to refresh a stale one from), no statistics."""
        with self._lock:
            entry = self._entries.get((schema, user_id, model))
            return entry.vectors if entry is not None else None

    def put(self, schema: str, user_id: str, model: str, vectors: UserVectors) -> None:
        """Keep a freshly loaded matrix (replacing the user's older one)."""
        if self.max_bytes <= 0 or vectors.nbytes > self.max_bytes:
            return
        slot = (schema, user_id, model)
        with self._lock:
            if slot in self._entries:
                self._drop(slot)
            self._entries[slot] = _Entry(vectors, self.clock())
            self._bytes += vectors.nbytes
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def evict(self, schema: str, user_ids: set[str]) -> None:
        """Drop every matrix of these users (their vectors changed)."""
        with self._lock:
            for slot in [s for s in self._entries if s[0] == schema and s[1] in user_ids]:
                self._drop(slot)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def state(self) -> MatrixCacheState:
        """Entries, bytes held, hits and loads so far."""
        with self._lock:
            return MatrixCacheState(len(self._entries), self._bytes, self._hits, self._loads)

    def _sweep(self) -> None:
        # Least recently used first: stop at the first entry used recently enough.
        oldest = self.clock() - self.idle
        while self._entries:
            slot, entry = next(iter(self._entries.items()))
            if entry.used > oldest:
                break
            self._drop(slot)

    def _drop(self, slot: _Slot) -> None:
        entry = self._entries.pop(slot)
        self._bytes -= entry.vectors.nbytes
