"""What a `RowSeal` makes of a key, once per key: the key store caches it with the key.

`DataKey(key)` seals and opens row fields under a memory's (or candidate's) data key: one
AES-GCM object and one keyed HMAC state for the synthetic nonces, instead of a new AES-GCM
object and a one-shot HMAC (which looks the digest up again) per field. `UserKey(memo, key)`
hashes a user's texts under the keys derived from the user's key, one HMAC state per purpose,
and remembers the term hashes it made (`hasher`), at most `memo.limit` for all the users of a
seal together. Both are made by `DataKeyStore.derived` and live in the key's cache entry, so
they go when the key does (shredded, evicted, expired): nothing here outlives the key.

The bytes are exactly those of the one-shot calls they replace: rows sealed before open, and a
rebuild writes the same bytes. `Hmac` computes HMAC-SHA256 from the key's two keyed SHA-256
states (RFC 2104, as the standard library's own pure-Python HMAC does), copied per message:
the same digest as `hmac.digest`, at half the cost of copying an `hmac.HMAC` (whose Python
wrapper adds three calls per message), which matters for the hundreds of thousands of term
hashes of a rebuild.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Callable
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["TERM_MEMO", "VERSION", "DataKey", "Hmac", "TermMemo", "UserKey"]

VERSION: Final = b"\x01"
_NONCE: Final = 12
_HASH_BYTES: Final = 10  # 80 bits: equality within one user's rows, no collision in practice
_BLOCK: Final = 64  # SHA-256's block size
_IPAD: Final = bytes(b ^ 0x36 for b in range(256))
_OPAD: Final = bytes(b ^ 0x5C for b in range(256))
TERM_MEMO: Final = 250_000
"""Term hashes a seal remembers at most, all users together (about 40 MB when full)."""


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

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._nonces = Hmac(key)

    def seal(self, aad: bytes, data: bytes) -> bytes:
        """VERSION | synthetic nonce (HMAC of aad, 0, data) | AES-GCM ciphertext of `data`."""
        nonce = self._nonces.digest(aad + b"\x00" + data)[:_NONCE]
        return VERSION + nonce + self._aead.encrypt(nonce, data, aad)

    def open(self, aad: bytes, sealed: bytes) -> bytes | None:
        """What `seal` sealed with this `aad`, or None when it is not (moved or altered)."""
        try:
            return self._aead.decrypt(
                bytes(sealed[1 : 1 + _NONCE]), bytes(sealed[1 + _NONCE :]), aad
            )
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

    def spend(self) -> bool:
        """Take one hash from the budget; False when there is none (nothing is remembered)."""
        self._left -= 1  # racing threads may miscount a few: the bound stays about `limit`
        if self._left >= 0:
            return True
        with self._lock:
            if self._left < 0:
                for user in list(self._users):
                    user.forget()
                self._left = self.limit - 1
        return self.limit > 0


class UserKey:
    """Keyed hashing of one user's texts: `digest(purpose, text)` and remembering `hasher`s."""

    __slots__ = ("__weakref__", "_bases", "_hashers", "_key", "_memo", "_remembered")

    def __init__(self, memo: TermMemo, key: bytes) -> None:
        self._key = key
        self._memo = memo
        self._bases: dict[str, Hmac] = {}
        self._hashers: dict[str, Callable[[str], str]] = {}
        self._remembered: dict[str, dict[str, str]] = {}
        memo.join(self)

    def digest(self, purpose: str, text: str) -> str:
        """HMAC of `text` under the user's key for `purpose` (hex of its first 80 bits)."""
        return self._base(purpose).digest(text.encode())[:_HASH_BYTES].hex()

    def hasher(self, purpose: str) -> Callable[[str], str]:
        """`digest` for one purpose, remembering each text's hash (within the seal's budget)."""
        hasher = self._hashers.get(purpose)
        if hasher is not None:
            return hasher
        hmac_digest = self._base(purpose).digest
        remembered = self._remembered.setdefault(purpose, {})
        spend = self._memo.spend

        def digest(text: str) -> str:
            hashed = remembered.get(text)
            if hashed is None:
                hashed = hmac_digest(text.encode())[:_HASH_BYTES].hex()
                if spend():
                    remembered[text] = hashed
            return hashed

        self._hashers[purpose] = digest
        return digest

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
