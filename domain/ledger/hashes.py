"""Keyed hashes of personal text, each under the key whose destruction makes it uncheckable.

Content hashes under a memory's key; key claims under the user's key; proposal fingerprints
under the key of the memory they are about, else the user's. A hash that a write stores comes
as `Keyed`: with the id and check value of the key it was made under, which the row names (a
foreign key to the live key: persistence/tables.py), so a hash made with a destroyed key
cannot be stored.
"""

from __future__ import annotations

import hmac
from typing import NamedTuple
from uuid import UUID

from domain.context import Retry
from domain.ledger.keystore import DataKeyStore, user_key_id
from domain.ledger.persistence.tables import key_check
from domain.model.values import Scope, normalise_content

__all__ = ["Keyed", "KeyedHashes", "keyed_hash"]

_LOCK_IDS_CACHED = 100_000


class Keyed(NamedTuple):
    """A keyed hash, with the id and check value of the key it was made under."""

    value: str
    key_id: UUID
    key_check: bytes


def keyed_hash(key: bytes, *parts: str) -> str:
    """HMAC-SHA256 over the parts: checkable only while `key` exists."""
    message = "\x1f".join(parts).encode()
    # hmac.new, not the one-shot hmac.digest: that one gives up the GIL on every call, and
    # taking it back from the save's other threads cost ~30 us a call against ~3 (measured)
    return hmac.new(key, message, "sha256").hexdigest()


class KeyedHashes:
    """The ledger's keyed hashes (see the module's docstring), with the user write-lock ids."""

    def __init__(self, keys: DataKeyStore) -> None:
        self.keys = keys
        self._locks: dict[str, int] = {}

    def lock(self, user_id: str) -> int:
        """The id of the user's write lock (a PostgreSQL advisory lock, a signed 64-bit int),
        keyed under the ledger's key: the locks table names no user."""
        lock_id = self._locks.get(user_id)
        if lock_id is None:
            digest = keyed_hash(self.keys.ledger_key(), "user-lock", user_id)
            lock_id = int(digest[:16], 16) - (1 << 63)
            if len(self._locks) >= _LOCK_IDS_CACHED:
                self._locks.clear()
            self._locks[user_id] = lock_id
        return lock_id

    def partition(self, user_id: str, partitions: int) -> int:
        """The user's ledger partition: a keyed hash of the id under the ledger's key (no
        caller can aim ids at one partition), modulo the partition count."""
        return self.keys.partition_in(user_id, partitions)

    def content(self, key_id: UUID, content: str) -> str:
        """Keyed hash of normalised content; uncheckable once the memory's key is shredded.

        Raises Retry when the key is gone (forgotten since the memory was loaded): the command
        reloads the memory and sees it forgotten.
        """
        return keyed_hash(self._live(key_id), "content", normalise_content(content))

    def claim(self, user_id: str, scope: Scope, memory_key: str) -> Keyed:
        """Keyed hash of (scope, memory key) under the user's key: reveals no memory key in
        clear."""
        user_key = self.keys.user_key(user_id)
        value = keyed_hash(user_key, "claim", scope.label(), memory_key)
        return Keyed(value, user_key_id(user_id), key_check(user_key))

    def proposal(
        self,
        user_id: str,
        scope: Scope,
        memory_key: str,
        content: str,
        category: str,
        about: UUID | None = None,
    ) -> Keyed:
        """Keyed fingerprint of a normalised proposal, for recognising it without its text.

        A proposal about a memory (`about`) is keyed with that memory's data key, so forgetting
        the memory makes every copy of it uncheckable; others with the user's key. Raises Retry
        when the memory's key is gone (as `content`).
        """
        if about is None:
            data_key, key_id = self.keys.user_key(user_id), user_key_id(user_id)
        else:
            data_key, key_id = self._live(about), about
        value = keyed_hash(
            data_key, "proposal", scope.label(), memory_key, normalise_content(content), category
        )
        return Keyed(value, key_id, key_check(data_key))

    def _live(self, key_id: UUID) -> bytes:
        """A memory's data key; Retry when it is gone (forgotten since the command loaded it)."""
        data_key = self.keys.get(key_id)
        if data_key is None:
            raise Retry(f"the data key of {key_id} is gone")
        return data_key
