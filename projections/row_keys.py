"""What a seal makes of one key, once, cached with the key (`DataKeyStore.derived`): a data
key's `DataKey` (AES-GCM, synthetic nonces), a user key's `UserKey` (keyed hashes by purpose,
the term hashes it made remembered within a `TermMemo` budget shared by one seal's users).

The bytes are those of the one-shot calls they replaced (rows sealed before open, a rebuild
writes the same bytes). `Hmac` is HMAC-SHA256 from the key's two keyed SHA-256 states copied
per message (RFC 2104, as the standard library's pure-Python HMAC): the digest of
`hmac.digest`, at about half the cost of copying an `hmac.HMAC` (three Python wrapper calls a
message), and unlike `hmac.digest` it keeps the GIL (see `UserKey._base`).
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Callable, Collection
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["HASH_BYTES", "NONCE", "TERM_BYTES", "VERSION", "DataKey", "Hmac", "TermMemo", "UserKey"]

VERSION: Final = b"\x01"
"""The first byte of every sealed value (what `DataKey.seal` writes)."""
NONCE: Final = 12
HASH_BYTES: Final = 10  # 80 bits: equality within one user's rows, no collision in practice
TERM_BYTES: Final = 8  # int8: 64 bits, as good within one user's terms (a collision: a false hit)
_BLOCK: Final = 64  # SHA-256's block size
_IPAD: Final = bytes(b ^ 0x36 for b in range(256))
_OPAD: Final = bytes(b ^ 0x5C for b in range(256))


class Hmac:
    """HMAC-SHA256 under one key, for many messages: `digest(message) == hmac.digest(key,
    message, "sha256")`."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\x00")
        self._inner = hashlib.sha256(key.translate(_IPAD))
        self._outer = hashlib.sha256(key.translate(_OPAD))

    def digest(self, message: bytes) -> bytes:
        """The HMAC of `message`."""
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


class DataKey:
    """Seals and opens row fields under one data key (see `RowSeal.seal_bytes`)."""

    __slots__ = ("_aead", "_nonces")

    def __init__(self, data_key: bytes) -> None:
        self._aead = AESGCM(data_key)
        self._nonces = Hmac(data_key)

    def seal(self, aad: bytes, data: bytes) -> bytes:
        """Version byte | synthetic nonce (HMAC of aad, 0, data) | AES-GCM ciphertext of `data`."""
        nonce = self._nonces.digest(aad + b"\x00" + data)[:NONCE]
        return VERSION + nonce + self._aead.encrypt(nonce, data, aad)

    def open(self, aad: bytes, sealed: bytes) -> bytes | None:
        """What `seal` sealed with this `aad`, or None when it is not (moved or altered)."""
        try:
            return self._aead.decrypt(bytes(sealed[1 : 1 + NONCE]), bytes(sealed[1 + NONCE :]), aad)
        except InvalidTag:
            return None  # not this row's (moved or altered): never shown


class TermMemo:
    """The budget of remembered hashes shared by the `UserKey`s of one seal: when it is spent,
    every one of them forgets what it remembered (a key dropped by the store takes its own)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._left = limit
        self._users: weakref.WeakSet[UserKey] = weakref.WeakSet()
        self._lock = threading.Lock()

    def join(self, user: UserKey) -> None:
        """Count `user`'s remembered hashes in this budget."""
        with self._lock:
            self._users.add(user)

    def spend(self, hashes: int = 1) -> bool:
        """Take `hashes` from the budget; False when there is none (nothing is remembered)."""
        if hashes > self.limit:
            return False
        self._left -= hashes  # racing threads may miscount a few: the bound stays about `limit`
        if self._left >= 0:
            return True
        with self._lock:
            if self._left < 0:
                for user in list(self._users):
                    user.forget()
                self._left = self.limit - hashes
        return True


class UserKey:
    """Keyed hashing of one user's texts: `digest(purpose, text)` and remembering `hasher`s."""

    __slots__ = ("__weakref__", "_bases", "_hashers", "_key", "_memo", "_remembered")

    def __init__(self, memo: TermMemo, key: bytes) -> None:
        self._key = key
        self._memo = memo
        self._bases: dict[str, Hmac] = {}
        self._hashers: dict[str, Callable[[Collection[str]], list[int]]] = {}
        self._remembered: dict[str, dict[str, int]] = {}
        memo.join(self)

    def digest(self, purpose: str, text: str) -> str:
        """HMAC of `text` under the user's key for `purpose` (hex of its first 80 bits)."""
        return self._base(purpose).digest(text.encode())[:HASH_BYTES].hex()

    def hasher(self, purpose: str) -> Callable[[Collection[str]], list[int]]:
        """Hashing of many texts for one purpose: the first 64 bits of each one's HMAC under the
        user's key for `purpose`, as a signed integer (an int8), remembering each text's hash
        within the seal's budget. One call per document: remembered hashes are found by a
        dict look-up each, only the others are computed."""
        hasher = self._hashers.get(purpose)
        if hasher is not None:
            return hasher
        hmac_digest = self._base(purpose).digest
        remembered: dict[str, int] = self._remembered.setdefault(purpose, {})
        spend = self._memo.spend
        from_bytes = int.from_bytes

        def hashes(texts: Collection[str]) -> list[int]:
            get = remembered.get
            found = [get(text) for text in texts]
            if None not in found:
                return found  # type: ignore[return-value]
            keep = spend(found.count(None))
            for i, text in enumerate(texts):
                if found[i] is None:
                    hashed = from_bytes(hmac_digest(text.encode())[:TERM_BYTES], signed=True)
                    found[i] = hashed
                    if keep:
                        remembered[text] = hashed
            return found  # type: ignore[return-value]

        self._hashers[purpose] = hashes
        return hashes

    def forget(self) -> None:
        """Drop every remembered hash (the budget is spent)."""
        for remembered in self._remembered.values():
            remembered.clear()

    def _base(self, purpose: str) -> Hmac:
        # The keyed state is computed once and copied per text. Not `hmac.digest` here either:
        # it lets go of the GIL, and gets it back only after the rebuild's reader thread (busy
        # decoding) yields it: about 1 ms a call in a rebuild's profile.
        base = self._bases.get(purpose)
        if base is None:
            key = Hmac(self._key).digest(f"memledger:rows:{purpose}".encode())
            base = self._bases[purpose] = Hmac(key)
        return base
