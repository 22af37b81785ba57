"""Personal fields of read-model rows, sealed with their memory's (or candidate's) data key.

`RowSeal(keys).seal(table, row_id, key_id, column, text)` gives the bytes a view stores
instead of `text`; `open(...)` with the same table, row id, key id and column gives the text
back, or REDACTED once the data key is destroyed (never an error). Equality lookups use
`user_hash` (HMAC under a key derived from the user's key), and the search index stores
`term_hasher(user_id)` of each term instead of the term.

Each view reaches the seal of its schema through `seal_for(schema)` (`Tables.seal`): the
processes that apply or read projections register their ledger's key store with `register`
(the projection worker, rebuild and its child processes).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg.sql import SQL, Composed

from domain.model.events import REDACTED

__all__ = ["RowKeys", "RowSeal", "register", "registered", "seal_for", "vacuum_promptly"]

_VERSION: Final = b"\x01"
_NONCE: Final = 12
_HASH_BYTES: Final = 10  # 80 bits: equality within one user's rows, no collision in practice


class RowKeys(Protocol):
    """The key store a seal reads (a `DataKeyStore`)."""

    def get(self, key_id: UUID) -> bytes | None: ...

    def prefetch(self, key_ids: Iterable[UUID]) -> None: ...

    def user_key(self, user_id: str) -> bytes: ...


class RowSeal:
    """Seals and opens a row's personal fields; hashes what must be found by equality."""

    def __init__(self, keys: RowKeys) -> None:
        self.keys = keys

    def seal(self, table: str, row_id: object, key_id: UUID, column: str, text: str) -> bytes:
        """`text` sealed under `key_id`'s data key, bound to table, row and column.

        A redacted text or a destroyed key gives b"" (which opens as REDACTED).
        """
        if text == REDACTED:
            return b""
        return self.seal_bytes(table, row_id, key_id, column, text.encode())

    def open(
        self, table: str, row_id: object, key_id: UUID, column: str, sealed: bytes | None
    ) -> str:
        """The text `seal` sealed, or REDACTED when its key is gone (or it was never sealed)."""
        data = self.open_bytes(table, row_id, key_id, column, sealed)
        return REDACTED if data is None else data.decode()

    def seal_bytes(
        self, table: str, row_id: object, key_id: UUID, column: str, data: bytes
    ) -> bytes:
        """`seal` of bytes (b"" when the key is gone).

        The nonce is synthetic (an HMAC of the associated data and the plaintext under the
        data key), so sealing is deterministic: a rebuild writes the very bytes the live
        table holds, and only the same plaintext in the same place repeats a nonce.
        """
        key = self.keys.get(key_id)
        if key is None:
            return b""
        aad = f"{table}|{row_id}|{column}".encode()
        nonce = hmac.digest(key, aad + b"\x00" + data, "sha256")[:_NONCE]
        return _VERSION + nonce + AESGCM(key).encrypt(nonce, data, aad)

    def open_bytes(
        self, table: str, row_id: object, key_id: UUID, column: str, sealed: bytes | None
    ) -> bytes | None:
        """What `seal_bytes` sealed, or None when its key is gone (or nothing was sealed)."""
        if not sealed or sealed[:1] != _VERSION:
            return None
        key = self.keys.get(key_id)
        if key is None:
            return None
        return _decrypt(AESGCM(key), f"{table}|{row_id}|{column}", sealed)

    def open_row(
        self, table: str, row_id: object, key_id: UUID, row: dict[str, Any], columns: Iterable[str]
    ) -> None:
        """`open` of the `columns` present in `row`, in place: one key look-up and one cipher
        for them all (the key is looked up only when one of them holds sealed bytes)."""
        cipher: AESGCM | None = None
        place = ""
        for column in columns:
            if column not in row:
                continue
            sealed = row[column]
            data = None
            if sealed and sealed[:1] == _VERSION:
                if not place:
                    place = f"{table}|{row_id}|"
                    key = self.keys.get(key_id)
                    cipher = AESGCM(key) if key is not None else None
                if cipher is not None:
                    data = _decrypt(cipher, place + column, sealed)
            row[column] = REDACTED if data is None else data.decode()

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        """Load the data keys of many rows at once before opening them."""
        self.keys.prefetch(key_ids)

    def user_hash(self, user_id: str, purpose: str, text: str) -> str:
        """Keyed hash of `text` for equality lookups among one user's rows ("" if redacted)."""
        if text == REDACTED:
            return ""
        return self.hasher(user_id, purpose)(text)

    def hasher(self, user_id: str, purpose: str) -> Callable[[str], str]:
        """Keyed hashing of many texts of one user for one purpose (e.g. "term")."""
        key = hmac.digest(
            self.keys.user_key(user_id), f"memledger:rows:{purpose}".encode(), "sha256"
        )
        # The keyed state is computed once and copied per text: a one-shot hmac.digest looks
        # the digest up again on every call (about twice the time, measured).
        base = hmac.new(key, digestmod=hashlib.sha256)

        def digest(text: str) -> str:
            mac = base.copy()
            mac.update(text.encode())
            return mac.digest()[:_HASH_BYTES].hex()

        return digest


def _decrypt(cipher: AESGCM, aad: str, sealed: bytes) -> bytes | None:
    """What `seal_bytes` sealed with `aad`, opened by `cipher`; None if it does not open."""
    try:
        return cipher.decrypt(
            bytes(sealed[1 : 1 + _NONCE]), bytes(sealed[1 + _NONCE :]), aad.encode()
        )
    except InvalidTag:
        return None  # not this row's (moved or altered): never shown


_SEALS: dict[str, RowSeal] = {}
_LOCK = threading.Lock()


def register(schema: str, keys: RowKeys) -> RowSeal:
    """Make `keys` the key store of the views of `schema` in this process."""
    with _LOCK:
        seal = _SEALS.get(schema)
        if seal is None or seal.keys is not keys:
            seal = _SEALS[schema] = RowSeal(keys)
        return seal


@contextmanager
def registered(schema: str, keys: RowKeys) -> Iterator[RowSeal]:
    """`register` for the block only: the registration it replaced comes back after it (a
    rebuild's own key store is closed with its ledger, while this process's worker goes on)."""
    with _LOCK:
        previous = _SEALS.get(schema)
    seal = register(schema, keys)
    try:
        yield seal
    finally:
        with _LOCK:
            if _SEALS.get(schema) is seal:
                if previous is None:
                    del _SEALS[schema]
                else:
                    _SEALS[schema] = previous


def seal_for(schema: str) -> RowSeal:
    """The seal of `schema`'s views (see `register`)."""
    seal = _SEALS.get(schema)
    if seal is None:
        raise LookupError(f"no key store registered for the views of schema {schema!r}")
    return seal


def vacuum_promptly(table: Composed) -> Composed:
    """Per-table autovacuum for a table of sealed or keyed rows: vacuumed after a few dead rows
    (a forget), not after a fifth of the table. Hygiene only (see docs/retrieval.md)."""
    return SQL(
        "ALTER TABLE {} SET (autovacuum_vacuum_scale_factor = 0,"
        " autovacuum_vacuum_threshold = 50, autovacuum_vacuum_cost_delay = 0)"
    ).format(table)
