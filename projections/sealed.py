"""Personal fields of read-model rows, sealed with their memory's (or candidate's) data key.

`RowSeal(keys).seal(table, row_id, key_id, column, text)` gives the bytes a view stores
instead of `text`; `open(...)` with the same table, row id, key id and column gives the text
back, or REDACTED once the data key is destroyed (never an error). Equality lookups use
`user_hash` (HMAC under a key derived from the user's key), and the search index stores
`hasher(user_id, "term")` of each term instead of the term (a 64-bit integer: an int8 array
sorts and indexes as integers, where hex text compared as strings).

Each view reaches the seal of its schema through `seal_for(schema)` (`Tables.seal`): the
processes that apply or read projections register their ledger's key store with `register`
(the projection worker, rebuild and its child processes).

What a seal needs of a key is made once per key and cached by the key store in the key's own
entry (`DataKeyStore.derived`), so it goes when the key does (shredded, evicted, expired):
projections/row_keys.py (`DataKey`, `UserKey`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Protocol, TypeVar
from uuid import UUID

from psycopg.sql import SQL, Composed

from domain.model.events import REDACTED
from projections.row_keys import VERSION, DataKey, TermMemo, UserKey

__all__ = [
    "TERM_MEMO",
    "RowKeys",
    "RowSeal",
    "register",
    "registered",
    "seal_for",
    "vacuum_promptly",
]

_T = TypeVar("_T")
TERM_MEMO: Final = 250_000
"""Term hashes a seal remembers at most, all users together (about 40 MB when full)."""


class RowKeys(Protocol):
    """The key store a seal reads (a `DataKeyStore`): what it makes of each key is cached with
    the key, and dropped with it."""

    def derived(self, key_id: UUID, make: Callable[[bytes], _T]) -> _T | None: ...

    def user_derived(self, user_id: str, make: Callable[[bytes], _T]) -> _T: ...

    def prefetch(self, key_ids: Iterable[UUID]) -> None: ...


class RowSeal:
    """Seals and opens a row's personal fields; hashes what must be found by equality.

    What sealing needs of a data key (its AES-GCM object and nonce HMAC state) and of a user's
    key (its keyed hashing states, and the term hashes made under it, at most `memo` of them
    for all users together) is made once per key and cached by the key store with the key.
    Remembered term hashes hold the terms in clear in this process's memory until the user's
    key leaves the cache: only a rebuild asks for them (`memo`, e.g. TERM_MEMO); a live seal
    (the worker's, the API's) remembers none, so a forgotten memory's terms stay in no cache.
    """

    def __init__(self, keys: RowKeys, *, memo: int = 0) -> None:
        self.keys = keys
        self.memo = memo
        self._user_key = functools.partial(UserKey, TermMemo(memo))  # cached under this

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
        data_key = self.keys.derived(key_id, DataKey)
        if data_key is None:
            return b""
        return data_key.seal(f"{table}|{row_id}|{column}".encode(), data)

    def open_bytes(
        self, table: str, row_id: object, key_id: UUID, column: str, sealed: bytes | None
    ) -> bytes | None:
        """What `seal_bytes` sealed, or None when its key is gone (or nothing was sealed)."""
        if not sealed or sealed[:1] != VERSION:
            return None
        data_key = self.keys.derived(key_id, DataKey)
        if data_key is None:
            return None
        return data_key.open(f"{table}|{row_id}|{column}".encode(), sealed)

    def open_row(
        self, table: str, row_id: object, key_id: UUID, row: dict[str, Any], columns: Iterable[str]
    ) -> None:
        """`open` of the `columns` present in `row`, in place: one key look-up and one row-id
        string for them all (the key is looked up only when one of them holds sealed bytes)."""
        data_key: DataKey | None = None
        place = ""
        for column in columns:
            if column not in row:
                continue
            sealed = row[column]
            data = None
            if sealed and sealed[:1] == VERSION:
                if not place:
                    place = f"{table}|{row_id}|"
                    data_key = self.keys.derived(key_id, DataKey)
                if data_key is not None:
                    data = data_key.open((place + column).encode(), sealed)
            row[column] = REDACTED if data is None else data.decode()

    def seal_row(
        self, table: str, row_id: object, key_id: UUID, row: dict[str, Any], columns: Iterable[str]
    ) -> None:
        """`seal` of the `columns` of `row`, in place: one key look-up and one row-id string
        for them all."""
        data_key = self.keys.derived(key_id, DataKey)
        place = f"{table}|{row_id}|"
        for column in columns:
            text = row[column]
            if data_key is None or text == REDACTED:
                row[column] = b""
            else:
                row[column] = data_key.seal((place + column).encode(), text.encode())

    def open_rows(
        self, rows: list[dict[str, Any]], table: str, id_column: str, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Rows read from `table`, each sealed under the key of its `id_column` (a memory's or
        a candidate's own), with `columns` opened in place (REDACTED once shredded); the keys
        of all the rows are loaded at once first."""
        if rows:
            self.prefetch(row[id_column] for row in rows)
        open_row = self.open_row
        for row in rows:
            row_id = row[id_column]
            open_row(table, row_id, row_id, row, columns)
        return rows

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        """Load the data keys of many rows at once before opening them."""
        self.keys.prefetch(key_ids)

    def user_hash(self, user_id: str, purpose: str, text: str) -> str:
        """Keyed hash of `text` for equality lookups among one user's rows ("" if redacted)."""
        if text == REDACTED:
            return ""
        return self.keys.user_derived(user_id, self._user_key).digest(purpose, text)

    def hasher(self, user_id: str, purpose: str) -> Callable[[Collection[str]], list[int]]:
        """Keyed hashing of many texts of one user for one purpose (e.g. "term"): each text's
        HMAC as a signed 64-bit integer, in order, remembered (see `UserKey.hasher`)."""
        return self.keys.user_derived(user_id, self._user_key).hasher(purpose)


_SEALS: dict[str, RowSeal] = {}
_LOCK = threading.Lock()


def register(schema: str, keys: RowKeys, *, memo: int = 0) -> RowSeal:
    """Make `keys` the key store of the views of `schema` in this process (`memo`: see
    RowSeal; a rebuild's)."""
    with _LOCK:
        seal = _SEALS.get(schema)
        if seal is None or seal.keys is not keys or seal.memo != memo:
            seal = _SEALS[schema] = RowSeal(keys, memo=memo)
        return seal


@contextmanager
def registered(schema: str, keys: RowKeys, *, memo: int = 0) -> Iterator[RowSeal]:
    """`register` for the block only: the registration it replaced comes back after it (a
    rebuild's own key store is closed with its ledger, while this process's worker goes on)."""
    with _LOCK:
        previous = _SEALS.get(schema)
    seal = register(schema, keys, memo=memo)
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
