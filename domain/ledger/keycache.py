"""The in-process cache of a DataKeyStore: unwrapped keys, destroyed ones, and what is made of them.

An entry holds a raw key (b"" once the key is known destroyed) until its ttl passes, the cache
evicts it (least recently used first) or the store drops it; whatever was derived from the key
(`derived`: an AES-GCM object, a keyed HMAC state, a memo of keyed hashes) lives in the entry
and goes with it, so nothing made of a key outlives the key's own cached copy. Not
thread-safe: the store calls every method with its lock held.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, TypeVar
from uuid import UUID

__all__ = ["Entry", "KeyCache"]

_T = TypeVar("_T")
MISSING: Final = b""


class Entry:
    """A cached key: its expiry, the raw key (b"": destroyed) and what was made of it."""

    __slots__ = ("derived", "expires", "raw")

    def __init__(self, expires: float, raw: bytes) -> None:
        self.expires = expires
        self.raw = raw
        self.derived: dict[object, Any] | None = None

    def made(self, make: Callable[[bytes], _T]) -> _T | None:
        """What `make` made of this key before, if it did."""
        derived = self.derived
        return None if derived is None else derived.get(make)

    def keep(self, make: Callable[[bytes], _T], made: _T) -> None:
        """Remember `make(raw)` with this key."""
        if self.derived is None:
            self.derived = {}
        self.derived[make] = made


class KeyCache:
    """Keys by id, for `ttl` seconds at most (a destroyed key's miss: until evicted), at most
    `size` of them."""

    def __init__(self, ttl: float, size: int) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[UUID, Entry] = OrderedDict()

    def live(self, key_id: UUID) -> Entry | None:
        """The entry of `key_id` unless unknown or expired (an expired key is dropped)."""
        entry = self._entries.get(key_id)
        if entry is None:
            return None
        if entry.raw and entry.expires < time.monotonic():
            del self._entries[key_id]
            return None
        return entry

    def cached(self, key_id: UUID) -> bytes | None:
        """The raw key, b"" when known destroyed, None when not cached (or expired)."""
        entry = self.live(key_id)
        return None if entry is None else entry.raw

    def loaded(self, key_id: UUID) -> bytes | None:
        """The raw key just remembered, even when a ttl of 0 has already expired it."""
        entry = self._entries.get(key_id)
        return None if entry is None else entry.raw

    def touch(self, key_id: UUID) -> None:
        """Move a cached key to the recent end (it is the last to be evicted)."""
        self._entries.move_to_end(key_id)

    def remember(self, key_id: UUID, raw: bytes) -> None:
        """Cache `raw` (MISSING: destroyed) for `key_id`; what was made of an older entry goes."""
        # A destroyed key never comes back, so a miss is cached for good (until evicted).
        self._entries[key_id] = Entry(time.monotonic() + self.ttl, raw)
        self._entries.move_to_end(key_id)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def drop(self, key_id: UUID) -> None:
        """Forget `key_id` (it is looked up again next time)."""
        self._entries.pop(key_id, None)

    def clear(self) -> None:
        """Forget every key and everything made of them."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
