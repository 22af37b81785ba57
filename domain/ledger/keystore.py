"""Per-aggregate data keys: create, cache, look up, shred and re-wrap (crypto-shredding)."""

from __future__ import annotations

import functools
import hmac
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar
from uuid import NAMESPACE_URL, UUID, uuid5

from domain.context import outage_unavailable
from domain.errors import MasterKeyMissing
from domain.ledger.keyring import MasterKeyring, UnknownMasterKey
from domain.ledger.persistence.key_table import KeyTable
from domain.ledger.persistence.partitions import partition_of_user
from domain.ledger.persistence.reads import Connections
from domain.ledger.persistence.tables import LEDGER_PARTITION, NewDataKey, key_check

__all__ = ["DataKeyStore", "user_key_id"]

_USER_KEYS: Final = uuid5(NAMESPACE_URL, "memledger:user-key")
_LEDGER_KEY: Final = uuid5(NAMESPACE_URL, "memledger:ledger-key")
_MISSING: Final = b""
_T = TypeVar("_T")
_Entry = tuple[float, bytes, dict[Any, Any] | None]  # expiry, raw key (or _MISSING), what's made


@functools.lru_cache(maxsize=4096)
def user_key_id(user_id: str) -> UUID:
    """The id of the key that keys a user's claims and fingerprints."""
    return uuid5(_USER_KEYS, user_id)


class DataKeyStore:
    """Finds the data key of an aggregate; a destroyed key is gone for every reader.

    Unwrapped keys are cached in this process for `cache_ttl` seconds at most. A key shredded
    here is dropped at once; one shredded by another process is dropped when its revocation
    note arrives (`revoked`, called by the ledger's revocation listener; docs/ledger.md).
    While a listener is attached but not listening (`untrusted`), nothing is cached past its
    use. Keys of aggregates being created are staged in memory until their save commits.
    What readers make of a key (`derived`) lives in its cache entry, and goes with it.
    No write can commit with a destroyed key, whatever this cache holds: claims and
    fingerprints name the key they were hashed under (persistence/tables.py).
    """

    def __init__(
        self,
        connections: Connections,
        keyring: MasterKeyring,
        *,
        cache_ttl: float = 30.0,
        cache_size: int = 100_000,
    ) -> None:
        self._table = KeyTable(connections)
        self._keyring = keyring
        self._ttl = cache_ttl
        self._size = cache_size
        self._cache: OrderedDict[UUID, _Entry] = OrderedDict()
        self._staged: dict[UUID, bytes] = {}
        self._lock = threading.Lock()
        self._trusted = True  # False while a revocation listener is attached but not listening
        # Bumped by every revocation: a load that began before one is used, never kept.
        self._epoch = 0
        self.partitions = 0
        """The ledger's partition count (set by the ledger once its recorder knows it): a
        user's key is stored in the user's partition (`partition_in`)."""
        self._partitions: dict[tuple[str, int], int] = {}

    def through(self, connections: Connections) -> DataKeyStore:
        """A store with the same master keys and cache settings reading through `connections`.

        For a forked process: connections must not cross a fork (a pool's sockets would be
        shared with the parent), nor may locks another thread held. Its cache starts empty.
        """
        store = DataKeyStore(connections, self._keyring, cache_ttl=self._ttl, cache_size=self._size)
        store.partitions = self.partitions
        return store

    def partition_in(self, user_id: str, partitions: int) -> int:
        """The user's ledger partition among `partitions`: a keyed hash of the id under the
        ledger's key (no caller can aim ids at one partition). Computed here, from this store's
        own ledger key, so that a store made `through` other connections needs no other."""
        partition = self._partitions.get((user_id, partitions))
        if partition is None:
            message = "\x1f".join(("partition", user_id)).encode()
            digest = hmac.digest(self.ledger_key(), message, "sha256").hex()
            partition = partition_of_user(digest, partitions)
            if len(self._partitions) >= self._size:
                self._partitions.clear()
            self._partitions[user_id, partitions] = partition
        return partition

    # -- creating ----------------------------------------------------------------------------

    def stage(
        self, key_id: UUID, user_id: str, kind: str, subject: UUID | None = None
    ) -> NewDataKey:
        """Generate a key for a new aggregate; it is usable at once and persisted by the save."""
        raw = os.urandom(32)
        master_id, wrapped = self._keyring.wrap(key_id.bytes, raw)
        with self._lock:
            self._staged[key_id] = raw
        return NewDataKey(key_id, user_id, kind, subject, master_id, wrapped, key_check(raw))

    def unstage(self, keys: Iterable[NewDataKey]) -> None:
        """Forget staged keys once their save committed (they are cached) or failed."""
        with self._lock:
            for key in keys:
                raw = self._staged.pop(key.key_id, None)
                if raw is not None:
                    self._remember(key.key_id, raw)

    def discard(self, keys: Iterable[NewDataKey]) -> None:
        """Drop staged keys whose save failed."""
        with self._lock:
            for key in keys:
                self._staged.pop(key.key_id, None)

    def user_key(self, user_id: str) -> bytes:
        """The user's own key (claims, fingerprints), created on first use.

        Concurrent first uses (threads or processes) race on the insert; every caller then
        reads back the one committed key, never a key of its own that lost the race.
        """
        return self._shared_key(user_key_id(user_id), user_id)

    def ledger_key(self) -> bytes:
        """The ledger's own key, created on first use: keys hashes that belong to no user
        (the ids of the per-user write locks). Owned by user "", never erased."""
        return self._shared_key(_LEDGER_KEY, "")

    def _shared_key(self, key_id: UUID, owner: str) -> bytes:
        raw = self.get(key_id)
        if raw is not None:
            return raw
        if owner:
            if not self.partitions:
                raise LookupError("the key store does not know the ledger's partitions")
            partition = self.partition_in(owner, self.partitions)
        else:
            partition = LEDGER_PARTITION  # the ledger's key: its owner's hash needs it
        raw = os.urandom(32)
        master_id, wrapped = self._keyring.wrap(key_id.bytes, raw)
        self._table.insert_user_key(partition, key_id, owner, master_id, wrapped, key_check(raw))
        with self._lock:
            self._cache.pop(key_id, None)
        raw = self.get(key_id)
        if raw is None:
            raise LookupError(f"the key of user {owner!r} vanished while being created")
        return raw

    # -- reading -----------------------------------------------------------------------------

    def get(self, key_id: UUID) -> bytes | None:
        """The raw data key, or None when it was destroyed (or never existed)."""
        with self._lock:
            staged = self._staged.get(key_id)
            if staged is not None:
                return staged
            cached = self._cached(key_id)
        if cached is not None:
            return cached or None
        self.prefetch([key_id])
        with self._lock:  # just loaded: used even when the ttl (0) has already expired it
            entry = self._cache.get(key_id)
        return entry[1] or None if entry is not None else None

    def derived(self, key_id: UUID, make: Callable[[bytes], _T]) -> _T | None:
        """`make(key)` of the data key, cached in the key's own entry (under `make`): it goes
        with the key (shredded, cleared, expired, evicted). None when the key is gone; a staged
        key's result is not cached."""
        # Read first without the lock (one dict lookup, atomic under the GIL): a rebuild's reader
        # thread holds the lock while it loads a batch's keys, and waiting for it there, with
        # the GIL handed over, cost ~60 us a call (cProfile, 20k events).
        entry = self._cache.get(key_id)
        if entry is not None and entry[2] is not None and entry[0] >= time.monotonic():
            made: _T | None = entry[2].get(make)
            if made is not None:
                return made
        with self._lock:
            entry = None if key_id in self._staged else self._live(key_id)
        if entry is not None:
            made = entry[2].get(make) if entry[2] else None
            if made is not None or not entry[1]:
                return made
        raw = entry[1] if entry is not None else self.get(key_id)
        if raw is None:
            return None
        made = make(raw)
        with self._lock:
            entry = None if key_id in self._staged else self._live(key_id)
            if entry is not None and entry[1] == raw:  # the same key, still cached
                self._cache[key_id] = (entry[0], raw, {**(entry[2] or {}), make: made})
        return made

    def user_derived(self, user_id: str, make: Callable[[bytes], _T]) -> _T:
        """`derived` of the user's own key (created on first use, as `user_key`)."""
        made = self.derived(user_key_id(user_id), make)
        if made is None:
            data_key = self.user_key(user_id)
            made = self.derived(user_key_id(user_id), make)  # cached now, unless ttl is 0
        return make(data_key) if made is None else made

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        """Load many keys in one query (replays and rebuilds call this per batch).

        Keys staged or still cached (destroyed ones included) are not asked for again; they
        only move to the recent end of the cache, so loading the others cannot evict them.
        """
        with self._lock:
            epoch = self._epoch
            wanted = []
            for key_id in set(key_ids):
                if key_id in self._staged:
                    continue
                if self._cached(key_id) is None:
                    wanted.append(key_id)
                else:
                    self._cache.move_to_end(key_id)
        if not wanted:
            return
        found = self._load(wanted)
        with self._lock:
            keep = epoch == self._epoch
            for key_id in wanted:
                self._remember(key_id, found.get(key_id, _MISSING), keep=keep)

    def refresh(self, key_ids: Iterable[UUID], destroyed: Iterable[UUID] = ()) -> None:
        """Read these keys afresh from the key table, whatever is cached (decoding the log for
        a projection or a replay trusts no cache): a key gone from the table is marked gone, a
        live one kept with what was made of it while it is the same key. `destroyed`: keys that
        count as gone whatever the table says (their tombstone is in the ledger)."""
        dead = set(destroyed)
        with self._lock:
            epoch = self._epoch
            wanted = [k for k in set(key_ids) if k not in self._staged and k not in dead]
        found = self._load(wanted) if wanted else {}
        with self._lock:
            keep = epoch == self._epoch
            for key_id in wanted:
                raw = found.get(key_id, _MISSING)
                entry = self._cache.get(key_id)
                if keep and raw and entry is not None and entry[1] == raw:
                    self._cache[key_id] = (self._expiry(), raw, entry[2])
                    self._cache.move_to_end(key_id)
                else:
                    self._remember(key_id, raw, keep=keep)
            for key_id in dead:
                self._staged.pop(key_id, None)
                self._remember(key_id, _MISSING)

    def owned_keys(self, user_id: str, kind: str) -> list[UUID]:
        """Ids of the live keys of one kind that belong to a user (e.g. all their memories)."""
        return self._table.owned(self.partition_in(user_id, self.partitions), user_id, kind)

    def candidates_about(self, partition: int, memory_id: UUID) -> list[UUID]:
        """Ids of the live candidate keys naming this memory (pending or accepted candidates),
        in its partition."""
        return self._table.about(partition, memory_id)

    def count_held(self, partition: int, aggregate_ids: list[UUID]) -> int:
        """How many keys still exist for these aggregates of one partition or for candidates
        about them."""
        if not aggregate_ids:
            return 0
        return self._table.count_held(partition, aggregate_ids)

    # -- shredding and rotation --------------------------------------------------------------

    def forget_cached(self, key_ids: Iterable[UUID]) -> None:
        """Mark keys destroyed in this process (call after the shredding transaction)."""
        with self._lock:
            self._epoch += 1
            for key_id in key_ids:
                self._staged.pop(key_id, None)
                self._remember(key_id, _MISSING)

    def forget_all_cached(self) -> None:
        """Drop the whole cache (e.g. after erasing a user, whose keys are not all known)."""
        with self._lock:
            self._epoch += 1
            self._cache.clear()

    def evict(self, key_ids: Iterable[UUID]) -> None:
        """Drop these keys from the cache (a write found one stale): read again on next use."""
        with self._lock:
            self._epoch += 1
            for key_id in key_ids:
                self._cache.pop(key_id, None)

    # -- revocations from other processes (domain/ledger/persistence/revocations.py) --------

    def revoked(self, key_ids: Iterable[UUID]) -> None:
        """Keys another process destroyed (a revocation note): gone here too, at once."""
        self.forget_cached(key_ids)

    def untrusted(self) -> None:
        """The revocation listener is not listening: notes may be missed, so nothing cached
        is trusted and nothing is cached past its use until `trusted`."""
        with self._lock:
            self._epoch += 1
            self._trusted = False
            self._cache.clear()

    def trusted(self) -> None:
        """The revocation listener listens (again): what was cached before is dropped, since
        notes sent before it listened were not heard, and caching resumes."""
        with self._lock:
            self._epoch += 1
            self._cache.clear()
            self._trusted = True

    def rotate(
        self,
        batch_size: int = 1000,
        progress: Callable[[int], None] | None = None,
        before_batch: Callable[[], None] | None = None,
    ) -> int:
        """Re-wrap every data key not yet under the active master key; returns how many.

        Events are never touched: only the wrapped copies in the key table change. Use
        KeyRotation (domain/ledger/rotation.py), which first checks that running processes can
        follow, and passes that check as `before_batch` (raise there to stop).
        """
        keyring = self._keyring

        def rewrap(master_id: str, key_id: UUID, wrapped: bytes) -> tuple[str, bytes]:
            return keyring.wrap(key_id.bytes, self._unwrap(master_id, key_id, wrapped))

        # A batch is up to `batch_size` keys, from one partition after another, each
        # partition's share in a transaction of its own (on Citus: one shard each).
        done = 0
        left = list(range(max(self.partitions, LEDGER_PARTITION + 1)))
        while left:
            if before_batch is not None:
                before_batch()
            batch = 0
            while left and batch < batch_size:
                rows = self._table.rewrap(left[0], keyring.active_id, batch_size - batch, rewrap)
                if rows < batch_size - batch:
                    left.pop(0)  # none left there (or only rows another rotation holds)
                batch += rows
            if not batch:
                break
            done += batch
            if progress is not None:
                progress(batch)
        return done

    def _unwrap(self, master_id: str, key_id: UUID, wrapped: bytes) -> bytes:
        """The raw key; MasterKeyMissing (a domain error: 503) when its master key is not held."""
        try:
            return self._keyring.unwrap(master_id, key_id.bytes, wrapped)
        except UnknownMasterKey as error:
            raise MasterKeyMissing(error.master_id) from error

    # -- cache internals (call with the lock held) -------------------------------------------

    def _cached(self, key_id: UUID) -> bytes | None:
        entry = self._live(key_id)
        return None if entry is None else entry[1]

    def _live(self, key_id: UUID) -> _Entry | None:
        entry = self._cache.get(key_id)
        if entry is not None and entry[1] and entry[0] < time.monotonic():
            del self._cache[key_id]  # expired, with what was made of it
            return None
        return entry

    def _expiry(self) -> float:
        return time.monotonic() + (self._ttl if self._trusted else 0.0)

    def _load(self, key_ids: Iterable[UUID]) -> dict[UUID, bytes]:
        """The raw keys of these ids that exist (no lock held); check values missing from rows
        written before they were kept are stored on the way."""
        found: dict[UUID, bytes] = {}
        unchecked: dict[UUID, bytes] = {}
        # An outage met here is LedgerUnavailable: a read that needs a key (a page of sealed
        # rows, a replay) then answers 503, and a projection batch is retried whole.
        with outage_unavailable():
            rows = self._table.wrapped(key_ids)
        for key_id, master_id, wrapped, check in rows:
            raw = found[key_id] = self._unwrap(master_id, key_id, wrapped)
            if check is None:
                unchecked[key_id] = key_check(raw)
        with outage_unavailable():
            self._table.set_checks(unchecked)
        return found

    def _remember(self, key_id: UUID, raw: bytes, *, keep: bool = True) -> None:
        # A destroyed key never comes back, so a miss is cached for good (until evicted); a
        # user's key made again after an erase is read afresh by `_shared_key`. A key loaded
        # across a revocation (not `keep`) serves the call that loaded it, and expires.
        expiry = self._expiry() if keep else time.monotonic()
        self._cache[key_id] = (expiry, raw, None)
        self._cache.move_to_end(key_id)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
