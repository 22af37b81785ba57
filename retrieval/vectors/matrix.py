"""A user's vectors as one matrix in memory, loaded once per change of their memories or vectors.

`UserVectors` holds the user's active memories that have a current vector (of the model, for
the memory's current revision) as one float32 matrix, with each one's stored hubness and what
the visibility rules need per row (scope, category, key, expiry) as small arrays, plus the
active workspace memories with or without a vector (they hide a global memory with their key).
Scoring a query is then one matrix product, and the rules of the lexical fetch (scopes, active
and unexpired, category, a global memory hidden by a visible workspace one) are one boolean
mask (`visible`), checked against `now` at every search: expiry changes results without any
event.

A matrix is valid for one `VectorKey`: the user's memory revision (`user_revisions`: every
event on the user's memories), the stamp the embeddings projection gives a user whenever one
of their vectors changes (`embedding_stamps`: vectors are written by their own worker, after
the memory events, and filled later when the embedder was down), and the identity of the
embeddings table (a rebuild swaps in a new one). `VectorKey` and every row's metadata are read
in one statement; the vectors of the rows a refresh does not hold yet in a second one, by
(memory id, revision), whose vector never changes: a matrix never mixes snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final
from uuid import UUID

import numpy as np
import numpy.typing as npt
from psycopg.sql import SQL

from domain.model.values import Scope
from projections.reads import Reads
from projections.tracking import TRACKING, Tables
from projections.views.embeddings import DTYPE, STAMPS, Vectors, open_vector

__all__ = ["UserVectors", "VectorKey", "load_user_vectors", "read_vector_key"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_NEVER: Final = np.iinfo(np.int64).max
Mask = npt.NDArray[np.bool_]


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


def _key_sql(t: Tables) -> Any:
    return SQL(
        "(SELECT revision FROM {r} WHERE user_id = %(user)s) AS revision,"
        " (SELECT position FROM {p} WHERE projection = 'user_revisions') AS r_position,"
        " (SELECT position FROM {p} WHERE projection = 'search_terms') AS s_position,"
        " (SELECT stamp FROM {st} WHERE user_id = %(user)s) AS stamp,"
        " to_regclass(%(table)s)::oid AS tbl"
    ).format(r=t["user_revisions"], p=t[TRACKING], st=t[STAMPS])


def _key(row: Sequence[Any]) -> VectorKey:
    return VectorKey(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), row[3], row[4])


def _params(reads: Reads, user_id: str) -> dict[str, Any]:
    return {"user": user_id, "table": f'"{reads.t.schema}"."{reads.t.name("embeddings")}"'}


# Statements composed once per schema: composing and quoting on every search cost more than
# running them (about 1 ms of Python against 0.1 ms in the server).
@lru_cache(maxsize=64)
def _key_statement(schema: str) -> str:
    return SQL("SELECT {}").format(_key_sql(Tables(schema))).as_string(None)


@lru_cache(maxsize=64)
def _load_statement(schema: str, vectors: bool) -> str:
    """Every row's metadata, and (`vectors`) its sealed vector and hubness."""
    t = Tables(schema)
    return (
        SQL(
            "SELECT {key}, d.* FROM (SELECT 1) one LEFT JOIN ("
            " SELECT s.memory_id, s.revision, s.scope_type, s.workspace_type, s.category,"
            "  s.key_hash AS memory_key, s.expires_at, e.memory_id IS NOT NULL AS has_vector{v}"
            " FROM {terms} s LEFT JOIN {embeddings} e ON e.memory_id = s.memory_id"
            "  AND e.user_id = %(user)s AND e.revision = s.revision AND e.model = %(model)s"
            "  AND e.vector IS NOT NULL"
            " WHERE s.user_id = %(user)s AND s.status = 'active'"
            "  AND (e.memory_id IS NOT NULL OR s.scope_type = 'workspace')) d ON true"
        )
        .format(
            key=_key_sql(t),
            terms=t["search_terms"],
            embeddings=t["embeddings"],
            v=SQL(", e.vector, e.hubness" if vectors else ""),
        )
        .as_string(None)
    )


@lru_cache(maxsize=64)
def _vectors_statement(schema: str) -> str:
    """The sealed vector and hubness of these (memory_id, revision) pairs."""
    return (
        SQL(
            "SELECT e.memory_id, e.vector, e.hubness FROM {} e"
            " JOIN unnest(%(ids)s::uuid[], %(revisions)s::int4[]) k (id, revision)"
            " ON e.memory_id = k.id AND e.revision = k.revision"
            " WHERE e.user_id = %(user)s AND e.model = %(model)s AND e.vector IS NOT NULL"
        )
        .format(Tables(schema)["embeddings"])
        .as_string(None)
    )


def read_vector_key(reads: Reads, user_id: str) -> VectorKey:
    """The user's current `VectorKey` (one short statement)."""
    with reads.pool.connection() as conn:
        row = conn.execute(_key_statement(reads.t.schema), _params(reads, user_id)).fetchone()
    assert row is not None
    return _key(row)


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
    shadow_scopes: npt.NDArray[np.int16]
    shadow_keys: npt.NDArray[np.int32]
    shadow_expires: npt.NDArray[np.int64]
    """The active workspace memories (vector or not): they hide global ones with their key."""
    scope_names: dict[tuple[str, str | None], int]
    category_names: dict[str, int]
    index: dict[UUID, int]
    """Row of each id."""
    id_order: npt.NDArray[np.int64]
    """Each row's rank in memory_id order (ties in similarity go to the smaller id)."""

    @property
    def nbytes(self) -> int:
        """Roughly what this holds in memory (the matrix, arrays, ids and maps)."""
        arrays = (
            self.revisions,
            self.matrix,
            self.hubness,
            self.scopes,
            self.categories,
            self.keys,
        )
        more = (self.expires, self.id_order, self.shadow_scopes, self.shadow_keys)
        # An id costs its UUID object, a tuple slot and a dict entry: about 200 bytes.
        tail = self.shadow_expires.nbytes + 200 * len(self.ids) + 1024
        return sum(a.nbytes for a in (*arrays, *more)) + tail

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

    def _scope_codes(self, scopes: Iterable[Scope]) -> npt.NDArray[np.int16]:
        codes = [self.scope_names.get((s.scope_type, s.workspace_type)) for s in scopes]
        return np.array([c for c in codes if c is not None], dtype=np.int16)

    def _global_codes(self) -> npt.NDArray[np.int16]:
        codes = [code for (kind, _), code in self.scope_names.items() if kind == "global"]
        return np.array(codes, dtype=np.int16)


def load_user_vectors(
    reads: Reads, user_id: str, model: str, dim: int, known: UserVectors | None = None
) -> UserVectors:
    """The user's matrix and its key, read in one snapshot.

    `known`: the user's previous matrix (of this model): the vectors of its rows whose revision
    is unchanged are taken from it, and only the others are read and opened, in a second
    statement on the same connection: a change costs the changed rows (and every row's
    metadata, one short row each), not the whole matrix. A row whose vector changed between
    the two statements is left out; the key read with the first then differs from the user's
    next one, so the next search refreshes it.
    """
    schema = reads.t.schema
    params: dict[str, Any] = {**_params(reads, user_id), "model": model}
    with reads.pool.connection() as conn, conn.cursor(binary=True) as cur:
        rows = cur.execute(_load_statement(schema, known is None), params).fetchall()
        found = [r[5:] for r in rows if r[5] is not None]
        reuse = _reusable(found, known)
        if known is None:
            sealed = [(r[0], r[8], r[9]) for r in found if r[7]]
        else:
            wanted = [r for r, i in zip(found, reuse, strict=True) if r[7] and i < 0]
            params |= {"ids": [r[0] for r in wanted], "revisions": [r[1] for r in wanted]}
            sealed = cur.execute(_vectors_statement(schema), params).fetchall() if wanted else []
    return _assemble(_key(rows[0]), found, reuse, _opened(reads, sealed, dim), known, dim)


def _reusable(rows: list[Sequence[Any]], known: UserVectors | None) -> list[int]:
    """Per row, its row in `known` when that holds its vector at the same revision, else -1."""
    if known is None:
        return [-1] * len(rows)
    index, revisions = known.index, known.revisions.tolist()
    found = [index.get(r[0], -1) for r in rows]
    return [i if i >= 0 and revisions[i] == r[1] else -1 for r, i in zip(rows, found, strict=True)]


def _opened(
    reads: Reads, sealed: Sequence[Sequence[Any]], dim: int
) -> dict[UUID, tuple[bytes, bytes]]:
    """memory id -> its opened vector and hubness (left out: the key is gone, another size)."""
    seal = reads.t.seal
    if sealed:
        seal.prefetch(r[0] for r in sealed)
    opened = {}
    for memory_id, vector, hubness in sealed:
        v = open_vector(seal, memory_id, vector)
        h = open_vector(seal, memory_id, hubness, "hubness")
        if v is not None and h is not None and (len(v), len(h)) == (dim * _SIZE, 2 * _SIZE):
            opened[memory_id] = (v, h)
    return opened


_SIZE: Final = DTYPE.itemsize


def _assemble(
    key: VectorKey,
    rows: list[Sequence[Any]],
    reuse: list[int],
    opened: dict[UUID, tuple[bytes, bytes]],
    known: UserVectors | None,
    dim: int,
) -> UserVectors:
    """One pass over the rows' metadata; vectors from `known` (`reuse`), else `opened`."""
    scope_names: dict[tuple[str, str | None], int] = {}
    category_names: dict[str, int] = {}
    key_names: dict[str, int] = {}
    ids: list[UUID] = []
    meta: list[tuple[int, int, int, int, int]] = []  # revision, scope, category, key, expiry
    shadows: list[tuple[int, int, int]] = []
    fresh: list[int] = []  # rows whose vector is in `opened`
    kept: list[tuple[int, int]] = []  # (row, row in `known`)
    for row, source in zip(rows, reuse, strict=True):
        memory_id, revision, kind, workspace, category, key_hash, expires, has_vector = row[:8]
        scope = scope_names.setdefault((kind, workspace), len(scope_names))
        code = key_names.setdefault(key_hash, len(key_names))
        expiry = _NEVER if expires is None else micros(expires)
        if kind == "workspace":
            shadows.append((scope, code, expiry))
        if not has_vector:
            continue
        if source >= 0:
            kept.append((len(ids), source))
        elif memory_id in opened:
            fresh.append(len(ids))
        else:
            continue  # not readable (the key is gone), or changed since the metadata was read
        category_code = category_names.setdefault(category, len(category_names))
        ids.append(memory_id)
        meta.append((revision, scope, category_code, code, expiry))
    n = len(ids)
    matrix = np.empty((n, dim), dtype=DTYPE)
    hubness = np.empty((n, 2), dtype=DTYPE)
    if fresh:
        pairs = [opened[ids[i]] for i in fresh]
        matrix[fresh] = np.frombuffer(b"".join(v for v, _ in pairs), DTYPE).reshape(-1, dim)
        hubness[fresh] = np.frombuffer(b"".join(h for _, h in pairs), DTYPE).reshape(-1, 2)
    if kept and known is not None:
        to, source = np.array(kept, dtype=np.intp).T
        matrix[to] = known.matrix[source]
        hubness[to] = known.hubness[source]
    columns = np.array(meta, dtype=np.int64).reshape(-1, 5).T
    shadow = np.array(shadows, dtype=np.int64).reshape(-1, 3).T
    halves = np.frombuffer(b"".join(u.bytes for u in ids), dtype=">u8").reshape(-1, 2)
    id_order = np.empty(n, dtype=np.int64)
    id_order[np.lexsort((halves[:, 1], halves[:, 0]))] = np.arange(n)
    return UserVectors(
        key=key,
        ids=tuple(ids),
        revisions=columns[0].astype(np.int32),
        matrix=matrix,
        hubness=hubness,
        scopes=columns[1].astype(np.int16),
        categories=columns[2].astype(np.int32),
        keys=columns[3].astype(np.int32),
        expires=columns[4].copy(),
        shadow_scopes=shadow[0].astype(np.int16),
        shadow_keys=shadow[1].astype(np.int32),
        shadow_expires=shadow[2].copy(),
        scope_names=scope_names,
        category_names=category_names,
        index={memory_id: i for i, memory_id in enumerate(ids)},
        id_order=id_order,
    )
