"""Master keys: they wrap every data key and never enter the database."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["KeyringError", "MasterKeyring", "UnknownMasterKey", "generate_master_key"]

_NONCE = 12


class KeyringError(Exception):
    """The master key configuration is unusable, or a wrapped key cannot be opened."""


class UnknownMasterKey(KeyringError):
    """A data key is wrapped under a master key this keyring does not hold (`master_id`)."""

    def __init__(self, master_id: str) -> None:
        super().__init__(f"master key {master_id} is not configured")
        self.master_id = master_id


def generate_master_key() -> str:
    """A new random 256-bit master key, base64 encoded (for configuration files)."""
    return base64.b64encode(os.urandom(32)).decode()


def _master_key_id(master_key: bytes) -> str:
    # A public, stable name for a master key that reveals nothing about it.
    return hmac.new(master_key, b"memledger master key id", hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class MasterKeyring:
    """The active master key (wraps new data keys) and retired ones (only unwrap).

    Build it with `from_base64`: the first key is active. Rotating while processes run
    (KeyRotation, domain/ledger/rotation.py; docs/operations.md, "Master key rotation"): add the
    new key after the old everywhere, rotate with it first, make it first everywhere, rotate
    again, then drop the old.
    """

    keys: dict[str, bytes]
    active_id: str
    _ciphers: dict[str, AESGCM] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_base64(cls, encoded: Sequence[str]) -> MasterKeyring:
        """Parse base64 keys of 32 bytes each; the first one is active."""
        if not encoded:
            raise KeyringError("no master key configured")
        keys: dict[str, bytes] = {}
        for item in encoded:
            try:
                raw = base64.b64decode(item.strip(), validate=True)
            except ValueError as error:
                raise KeyringError("a master key is not valid base64") from error
            if len(raw) != 32:
                raise KeyringError("a master key must be 32 bytes (256 bits)")
            keys.setdefault(_master_key_id(raw), raw)
        active_id = _master_key_id(base64.b64decode(encoded[0].strip()))
        return cls(keys=keys, active_id=active_id)

    @property
    def held_ids(self) -> list[str]:
        """The ids of the master keys held: the active one first, then as configured."""
        return [self.active_id, *(key_id for key_id in self.keys if key_id != self.active_id)]

    def wrap(self, key_id: bytes, data_key: bytes) -> tuple[str, bytes]:
        """Encrypt a data key under the active master key: (master key id, nonce + ciphertext)."""
        nonce = os.urandom(_NONCE)
        sealed = self._cipher(self.active_id).encrypt(nonce, data_key, key_id)
        return self.active_id, nonce + sealed

    def unwrap(self, master_id: str, key_id: bytes, wrapped: bytes) -> bytes:
        """Decrypt a data key wrapped by `wrap` under the master key `master_id`."""
        if master_id not in self.keys:
            raise UnknownMasterKey(master_id)
        try:
            return self._cipher(master_id).decrypt(wrapped[:_NONCE], wrapped[_NONCE:], key_id)
        except Exception as error:
            raise KeyringError("a data key failed authentication") from error

    def _cipher(self, master_id: str) -> AESGCM:
        cipher = self._ciphers.get(master_id)
        if cipher is None:
            cipher = self._ciphers[master_id] = AESGCM(self.keys[master_id])
        return cipher
