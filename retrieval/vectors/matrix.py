"""A user's vectors as one matrix in memory, changed row by row as their memories change.

`UserVectors` holds the user's active memories that have a current vector (of the model, for
the memory's current revision) as one float32 matrix, with each one's stored hubness and what
the visibility rules need per row (scope, category, key, expiry) as small arrays, plus the
active workspace memories with or without a vector (they hide a global memory with their key).
Scoring a query is then one matrix product, and the rules of the lexical fetch (scopes, active
and unexpired, category, a global memory hidden by a visible workspace one) are one boolean
mask (`visible`), checked against `now` at every search: expiry changes results without any
event.

It also knows which of the user's memories it has seen (`present`, every status) and which
active ones still wait for a vector (`pending`): a change is applied by `merged` from the
rows changed since (retrieval/vectors/matrix_load.py reads them), never by reading every row
again, and `without` removes rows at once (a forget). A matrix is never changed in place: a
search holding the previous one keeps scoring it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from uuid import UUID

import numpy as np
import numpy.typing as npt

from domain.model.values import Scope
from projections.views.vectors import DTYPE, Vectors

__all__ = ["Row", "UserVectors", "VectorKey", "merged", "micros"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_NEVER: Final = np.iinfo(np.int64).max
_SIZE: Final = DTYPE.itemsize
Mask = npt.NDArray[np.bool_]
Row = Sequence[Any]
"""memory_id, revision, scope_type, workspace_type, category, key hash, expires_at, active,
has_vector: a search_terms row and whether a current vector exists (matrix_load.py)."""


def micros(moment: datetime) -> int:
    """A timestamp as exact integer microseconds since the epoch (no float rounding)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class VectorKey:
    """What a user's matrix depends on, and where the two projections involved stand."""

    revision: int
    revisions_position: int
    terms_position: int
    stamp: UUID | None
    table: int | None
    """The embeddings table's identity (a rebuild swaps in a new one)."""
    terms_table: int | None = None
    """The search_terms table's identity (row positions are comparable within one)."""

    @property
    def identity(self) -> tuple[int, UUID | None, int | None]:
        """Equal identities: equal rows (given `may_serve` and `may_store`)."""
        return self.revision, self.stamp, self.table

    @property
    def may_serve(self) -> bool:
        """The revision accounts for every change search_terms shows (as the search cache)."""
        return self.revisions_position >= self.terms_position

    @property
    def may_store(self) -> bool:
        """Rows read with this key are at least as new as its revision."""
        return self.terms_position >= self.revisions_position

    def follows(self, older: VectorKey) -> bool:
        """Rows changed after `older`'s search_terms position turn a matrix of `older` into
        one of this key (same tables, not behind)."""
        return (self.table, self.terms_table) == (older.table, older.terms_table) and (
            self.terms_position >= older.terms_position
        )


@dataclass(frozen=True, slots=True)
class UserVectors:
    """A user's active memories with a current vector (rows of `matrix`), for one model."""

    key: VectorKey
    ids: tuple[UUID, ...]
    revisions: npt.NDArray[np.int32]
    matrix: Vectors
    """(len(ids), dim) unit vectors, float32."""
    hubness: Vectors
    """(len(ids), 2): each row's stored (Latin, CJK) hubness (retrieval/vectors/background.py)."""
    scopes: npt.NDArray[np.int16]
    """Index into `scope_names` of each row's (scope_type, workspace_type)."""
    categories: npt.NDArray[np.int32]
    keys: npt.NDArray[np.int32]
    expires: npt.NDArray[np.int64]
    """Expiry in microseconds since the epoch (int64 max: never)."""
    halves: npt.NDArray[np.uint64]
    """(len(ids), 2): each id as two big-endian halves (for `id_order`)."""
    shadow_ids: tuple[UUID, ...]
    shadow_scopes: npt.NDArray[np.int16]
    shadow_keys: npt.NDArray[np.int32]
    shadow_expires: npt.NDArray[np.int64]
    """The active workspace memories (vector or not): they hide global ones with their key."""
    scope_names: dict[tuple[str, str | None], int]
    category_names: dict[str, int]
    key_names: dict[str, int]
    index: dict[UUID, int]
    """Row of each id."""
    id_order: npt.NDArray[np.int64]
    """Each row's rank in memory_id order (ties in similarity go to the smaller id)."""
    present: frozenset[UUID]
    """Every memory of the user in search_terms (any status) when the rows were read."""
    pending: Mapping[UUID, int]
    """Active memories without a vector of their revision yet, and their revision."""

    @property
    def nbytes(self) -> int:
        """Roughly what this holds in memory (the matrix, arrays, ids and maps)."""
        arrays = (self.revisions, self.matrix, self.hubness, self.scopes, self.categories)
        more = (self.keys, self.expires, self.halves, self.id_order, self.shadow_scopes)
        # An id costs its UUID object, a tuple slot, set and dict entries: about 300 bytes.
        tail = self.shadow_keys.nbytes + self.shadow_expires.nbytes + 1024
        ids = len(self.ids) + len(self.present) + len(self.shadow_ids) + len(self.pending)
        return sum(a.nbytes for a in (*arrays, *more)) + 100 * ids + 200 * len(self.ids) + tail

    def visible(self, scopes: Sequence[Scope], now: datetime, category: str | None) -> Mask:
        """Rows the search may return: in `scopes`, unexpired, of `category`, not hidden."""
        wanted = self._scope_codes(scopes)
        at = micros(now)
        mask = np.isin(self.scopes, wanted) & (self.expires > at)
        if category is not None:
            mask &= self.categories == self.category_names.get(category, -1)
        shadowing = np.isin(self.shadow_scopes, wanted) & (self.shadow_expires > at)
        if shadowing.any():
            hidden = np.isin(self.keys, self.shadow_keys[shadowing])
            mask &= ~(hidden & np.isin(self.scopes, self._global_codes()))
        return mask

    def without(self, gone: Collection[UUID]) -> UserVectors:
        """This matrix without these memories' rows (forgotten: they never come back)."""
        if not any(m in self.index or m in self.pending for m in gone):
            return self
        return merged(self, self.key, [], {}, removed=gone)

    def _scope_codes(self, scopes: Iterable[Scope]) -> npt.NDArray[np.int16]:
        codes = [self.scope_names.get((s.scope_type, s.workspace_type)) for s in scopes]
        return np.array([c for c in codes if c is not None], dtype=np.int16)

    def _global_codes(self) -> npt.NDArray[np.int16]:
        codes = [code for (kind, _), code in self.scope_names.items() if kind == "global"]
        return np.array(codes, dtype=np.int16)


def empty(key: VectorKey, dim: int) -> UserVectors:
    """A matrix of no rows (what `merged` adds every row to on a first load)."""
    none = np.empty(0, dtype=np.int64)
    return UserVectors(
        key=key,
        ids=(),
        revisions=none.astype(np.int32),
        matrix=np.empty((0, dim), dtype=DTYPE),
        hubness=np.empty((0, 2), dtype=DTYPE),
        scopes=none.astype(np.int16),
        categories=none.astype(np.int32),
        keys=none.astype(np.int32),
        expires=none,
        halves=np.empty((0, 2), dtype=np.uint64),
        shadow_ids=(),
        shadow_scopes=none.astype(np.int16),
        shadow_keys=none.astype(np.int32),
        shadow_expires=none,
        scope_names={},
        category_names={},
        key_names={},
        index={},
        id_order=none,
        present=frozenset(),
        pending={},
    )


def merged(
    base: UserVectors,
    key: VectorKey,
    rows: Sequence[Row],
    opened: Mapping[UUID, tuple[bytes, bytes]],
    removed: Collection[UUID] = (),
) -> UserVectors:
    """`base` with `rows` (the memories changed since it was read) applied and the `removed`
    memories dropped, under `key`.

    A changed row replaces the memory's row (or drops it: not active, no readable vector); its
    vector is `base`'s when the revision is unchanged, else taken from `opened` (memory id ->
    vector and hubness bytes; a memory missing there has no readable vector: its key is gone).
    Only the changed rows cost Python work; the arrays are copied once.
    """
    touched = {r[0] for r in rows} | set(removed)
    if not touched:
        return replace(base, key=key)
    scope_names = dict(base.scope_names)
    category_names = dict(base.category_names)
    key_names = dict(base.key_names)
    pending = {m: r for m, r in base.pending.items() if m not in touched}
    added: list[tuple[UUID, int, int, int, int, int]] = []  # id, revision, scope, cat, key, exp
    vectors: list[Any] = []  # per added row: a row of base, or the opened bytes
    shadows: list[tuple[UUID, int, int, int]] = []
    for memory_id, revision, kind, workspace, category, key_hash, expires, active, has in rows:
        if memory_id in removed or not active:
            continue
        scope = scope_names.setdefault((kind, workspace), len(scope_names))
        code = key_names.setdefault(key_hash, len(key_names))
        expiry = _NEVER if expires is None else micros(expires)
        if kind == "workspace":
            shadows.append((memory_id, scope, code, expiry))
        source: Any = None
        at = base.index.get(memory_id)
        if has and at is not None and base.revisions[at] == revision:
            source = at
        elif has:
            source = opened.get(memory_id)
        if source is None:
            if not has:
                pending[memory_id] = revision
            continue  # no vector yet, or not readable (the key is gone)
        category_code = category_names.setdefault(category, len(category_names))
        added.append((memory_id, revision, scope, category_code, code, expiry))
        vectors.append(source)
    keep = np.ones(len(base.ids), dtype=bool)
    keep[[base.index[m] for m in touched if m in base.index]] = False
    kept = int(keep.sum())
    n, dim = kept + len(added), base.matrix.shape[1]
    matrix = np.empty((n, dim), dtype=DTYPE)
    hubness = np.empty((n, 2), dtype=DTYPE)
    np.compress(keep, base.matrix, axis=0, out=matrix[:kept])
    np.compress(keep, base.hubness, axis=0, out=hubness[:kept])
    for row, source in enumerate(vectors, start=kept):
        if isinstance(source, tuple):
            matrix[row] = np.frombuffer(source[0], DTYPE)
            hubness[row] = np.frombuffer(source[1], DTYPE)
        else:
            matrix[row] = base.matrix[source]
            hubness[row] = base.hubness[source]
    new_ids = [a[0] for a in added]
    ids = tuple(m for m, k in zip(base.ids, keep.tolist(), strict=True) if k) + tuple(new_ids)
    columns = np.array([a[1:] for a in added], dtype=np.int64).reshape(-1, 5).T
    halves = np.concatenate([base.halves[keep], _halves(new_ids)])
    id_order = np.empty(n, dtype=np.int64)
    id_order[np.lexsort((halves[:, 1], halves[:, 0]))] = np.arange(n)
    shadow_keep = [i for i, m in enumerate(base.shadow_ids) if m not in touched]
    shadow = np.array([s[1:] for s in shadows], dtype=np.int64).reshape(-1, 3).T

    def join(old: npt.NDArray[Any], new: npt.NDArray[Any], mask: Any) -> npt.NDArray[Any]:
        return np.concatenate([old[mask], new.astype(old.dtype)])

    return UserVectors(
        key=key,
        ids=ids,
        revisions=join(base.revisions, columns[0], keep),
        matrix=matrix,
        hubness=hubness,
        scopes=join(base.scopes, columns[1], keep),
        categories=join(base.categories, columns[2], keep),
        keys=join(base.keys, columns[3], keep),
        expires=join(base.expires, columns[4], keep),
        halves=halves,
        shadow_ids=tuple(base.shadow_ids[i] for i in shadow_keep) + tuple(s[0] for s in shadows),
        shadow_scopes=join(base.shadow_scopes, shadow[0], shadow_keep),
        shadow_keys=join(base.shadow_keys, shadow[1], shadow_keep),
        shadow_expires=join(base.shadow_expires, shadow[2], shadow_keep),
        scope_names=scope_names,
        category_names=category_names,
        key_names=key_names,
        index={m: i for i, m in enumerate(ids)},
        id_order=id_order,
        present=(base.present | {r[0] for r in rows}) - set(removed),
        pending=pending,
    )


def _halves(ids: Sequence[UUID]) -> npt.NDArray[np.uint64]:
    data = np.frombuffer(b"".join(u.bytes for u in ids), dtype=">u8").reshape(-1, 2)
    return data.astype(np.uint64)


def vector_size(dim: int) -> tuple[int, int]:
    """The byte lengths of an opened vector and of its hubness."""
    return dim * _SIZE, 2 * _SIZE
