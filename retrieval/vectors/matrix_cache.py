"""The per-user matrices kept in memory: bounded by bytes, valid for one `VectorKey` each.

A search looks its user's matrix up with the key it just read: under another key (the user's
memories or vectors changed) it is a miss, and the search refreshes the matrix from the rows
changed since (`peek`, retrieval/vectors/matrix_load.py) and puts the result in its place, so
at most one matrix per user and model is held. Entries not used for `idle` seconds are
dropped (swept at every access), least recently used ones go first when the bytes exceed
`max_bytes`. `forget(schema, {user: ids})` removes forgotten memories' rows at once (the
embeddings projection calls it in the forget's batch) and keeps their ids, so that a matrix
read before the forget and put after it loses them too. Vectors are personal data: they are
held here only, never logged or written anywhere.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from retrieval.vectors.matrix import UserVectors, VectorKey

__all__ = ["DEFAULT_IDLE", "DEFAULT_MAX_BYTES", "MatrixCache", "MatrixCacheState"]

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
"""About 16 users with 10,000 memories each (384-dimension float32 vectors)."""
DEFAULT_IDLE: Final = 600.0
FORGOTTEN_KEPT: Final = 100_000
"""Forgotten ids remembered (a few MB at most; a matrix read that old is long put or dropped)."""

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
        self._forgotten: OrderedDict[tuple[str, UUID], None] = OrderedDict()

    def get(self, schema: str, user_id: str, model: str, key: VectorKey) -> UserVectors | None:
        """The user's matrix if it was loaded under this very key (else None: load it)."""
        slot = (schema, user_id, model)
        with self._lock:
            self._sweep()
            entry = self._entries.get(slot)
            if entry is None or entry.vectors.key.identity != key.identity:
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

    def put(self, schema: str, user_id: str, model: str, vectors: UserVectors) -> UserVectors:
        """Keep a freshly loaded matrix (replacing the user's older one); returns it without
        the memories forgotten meanwhile (what the caller should score)."""
        slot = (schema, user_id, model)
        with self._lock:
            vectors = self._without_forgotten(schema, vectors)
            if self.max_bytes <= 0 or vectors.nbytes > self.max_bytes:
                return vectors
            if slot in self._entries:
                self._drop(slot)
            self._entries[slot] = _Entry(vectors, self.clock())
            self._bytes += vectors.nbytes
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))
        return vectors

    def forget(self, schema: str, forgotten: Mapping[str, Collection[UUID]]) -> None:
        """Remove these users' forgotten memories from their matrices now, and from any matrix
        put later (one read before the forget)."""
        with self._lock:
            for memory_ids in forgotten.values():
                for memory_id in memory_ids:
                    self._forgotten[schema, memory_id] = None
            while len(self._forgotten) > FORGOTTEN_KEPT:
                self._forgotten.popitem(last=False)
            for slot in [s for s in self._entries if s[0] == schema and s[1] in forgotten]:
                entry = self._entries[slot]
                smaller = entry.vectors.without(forgotten[slot[1]])
                self._bytes += smaller.nbytes - entry.vectors.nbytes
                entry.vectors = smaller

    def _without_forgotten(self, schema: str, vectors: UserVectors) -> UserVectors:
        if not self._forgotten:
            return vectors
        gone = [m for s, m in self._forgotten if s == schema]
        return vectors.without(gone) if gone else vectors

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._forgotten.clear()

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
