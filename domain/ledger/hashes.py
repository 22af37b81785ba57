"""Keyed hashes (HMAC-SHA256) of short personal text: checkable only while their key exists."""

from __future__ import annotations

from uuid import UUID

from domain.ledger.keystore import DataKeyStore
from domain.ledger.retries import Retry
from domain.model.text import normalise_content
from domain.model.values import Scope

__all__ = ["KeyedHashes"]

_LOCK_IDS_CACHED = 100_000


class KeyedHashes:
    """Content hashes under a memory's key; claims and proposal prints under the user's key."""

    def __init__(self, keys: DataKeyStore) -> None:
        self.keys = keys
        self._locks: dict[str, int] = {}

    def lock(self, user_id: str) -> int:
        """The id of the user's write lock (a PostgreSQL advisory lock, a signed 64-bit int),
        keyed under the ledger's key: the locks table names no user."""
        lock_id = self._locks.get(user_id)
        if lock_id is None:
            digest = self.keys.keyed_hash(self.keys.ledger_key(), "user-lock", user_id)
            lock_id = int(digest[:16], 16) - (1 << 63)
            if len(self._locks) >= _LOCK_IDS_CACHED:
                self._locks.clear()
            self._locks[user_id] = lock_id
        return lock_id

    def content(self, key_id: UUID, content: str) -> str:
        """Keyed hash of normalised content; uncheckable once the memory's key is shredded.

        Raises Retry when the key is gone (forgotten since the memory was loaded): the command
        reloads the memory and sees it forgotten.
        """
        key = self.keys.get(key_id)
        if key is None:
            raise Retry(f"the data key of {key_id} is gone")
        return self.keys.keyed_hash(key, "content", normalise_content(content))

    def claim(self, user_id: str, scope: Scope, memory_key: str) -> str:
        """Keyed hash of (scope, key) under the user's key: reveals no key in clear."""
        return self.keys.keyed_hash(self.keys.user_key(user_id), "claim", scope.label(), memory_key)

    def proposal(
        self, user_id: str, scope: Scope, memory_key: str, content: str, category: str
    ) -> str:
        """Keyed fingerprint of a normalised proposal, for recognising it without its text."""
        return self.keys.keyed_hash(
            self.keys.user_key(user_id),
            "proposal",
            scope.label(),
            memory_key,
            normalise_content(content),
            category,
        )
