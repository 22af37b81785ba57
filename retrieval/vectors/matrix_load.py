"""Reading a user's matrix (retrieval/vectors/matrix.py): whole once, then only what changed.

A matrix is valid for one `VectorKey`: the user's memory revision (`user_revisions`: every
event on the user's memories), the stamp the embeddings projection gives a user whenever one
of their vectors changes (`embedding_stamps`: vectors are written by their own worker, after
the memory events, and filled later when the embedder was down), and the identities of the
embeddings and search_terms tables (a rebuild swaps in new ones). The key and the rows are
read in one statement, so a matrix never mixes snapshots.

The first load reads every search_terms row of the user with its vector. After a change, the
refresh reads only the rows whose `position` (the last event that changed them) is past the
search_terms position the matrix was read at, plus the memories still waiting for a vector
(`pending`: a vector written later, by the embeddings worker or its backfill, renews the stamp
but moves no search_terms row), with the sealed vectors of those whose revision changed: a
change costs its rows, not the user's 10,000. A forgotten memory leaves no row to read: the
same statement counts the user's rows, and when that is fewer than the matrix has seen, their
ids are read (one index scan) and the missing ones dropped. In this process a forget drops the
row before that (the embeddings projection calls `MatrixCache.forget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any
from uuid import UUID

from psycopg.sql import SQL, Literal

from domain.ledger.positions import PARTITION_BITS
from projections.reads import Reads
from projections.tracking import TRACKING, Tables
from projections.views.embeddings import STAMPS, open_vector
from retrieval.vectors.matrix import UserVectors, VectorKey, empty, merged, vector_size

__all__ = ["load_user_vectors", "read_vector_key"]


def _tracked(t: Tables, projection: str) -> Any:
    """A projection's position in the user's ledger partition (`%(partition)s`), packed as the
    rows' positions are (domain/ledger/positions.py)."""
    return SQL(
        "(SELECT position << {bits} | partition FROM {p}"
        " WHERE partition = %(partition)s AND projection = {name})"
    ).format(bits=Literal(PARTITION_BITS), p=t[TRACKING], name=Literal(projection))


def _key_sql(t: Tables) -> Any:
    return SQL(
        "(SELECT revision FROM {r} WHERE partition = %(partition)s AND user_id = %(user)s)"
        " AS revision, {revisions} AS r_position, {terms} AS s_position,"
        " (SELECT stamp FROM {st} WHERE partition = %(partition)s AND user_id = %(user)s)"
        " AS stamp,"
        " to_regclass(%(table)s)::oid AS tbl, to_regclass(%(terms)s)::oid AS terms_tbl"
    ).format(
        r=t["user_revisions"],
        revisions=_tracked(t, "user_revisions"),
        terms=_tracked(t, "search_terms"),
        st=t[STAMPS],
    )


def _key(row: Sequence[Any]) -> VectorKey:
    return VectorKey(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), *row[3:6])


_KEY_COLUMNS = 6


def _params(reads: Reads, user_id: str) -> dict[str, Any]:
    t, schema = reads.t, reads.t.schema
    return {
        "user": user_id,
        "partition": reads.partition(user_id),
        "table": f'"{schema}"."{t.name("embeddings")}"',
        "terms": f'"{schema}"."{t.name("search_terms")}"',
    }


# Statements composed once per schema: composing and quoting on every search cost more than
# running them (about 1 ms of Python against 0.1 ms in the server).
@lru_cache(maxsize=64)
def _key_statement(schema: str) -> str:
    return SQL("SELECT {}").format(_key_sql(Tables(schema))).as_string(None)


@lru_cache(maxsize=64)
def _rows_statement(schema: str, changed: bool) -> str:
    """The key, then the user's rows (`changed`: past a position, or pending; with a count of
    all the user's rows), each with its sealed vector and hubness when current."""
    t = Tables(schema)
    which = (
        " AND (s.position > %(since)s OR s.memory_id = ANY(%(pending)s::uuid[]))" if changed else ""
    )
    # Rows can only have gone when search_terms moved since (a forget is an event of it).
    count = (
        ", CASE WHEN {moved} > %(since)s"
        " THEN (SELECT count(*) FROM {terms} WHERE partition = %(partition)s"
        " AND user_id = %(user)s) END AS present"
        if changed
        else ""
    )
    return (
        SQL(
            "SELECT {key}" + count + ", d.* FROM (SELECT 1) one LEFT JOIN ("
            " SELECT s.memory_id, s.revision, s.scope_type, s.workspace_type, s.category,"
            "  s.key_hash, s.expires_at, s.status = 'active', e.memory_id IS NOT NULL,"
            "  e.vector, e.hubness"
            " FROM {terms} s LEFT JOIN {embeddings} e ON e.partition = s.partition"
            "  AND e.memory_id = s.memory_id"
            "  AND e.user_id = %(user)s AND e.revision = s.revision AND e.model = %(model)s"
            "  AND e.vector IS NOT NULL"
            " WHERE s.partition = %(partition)s AND s.user_id = %(user)s" + which + ") d ON true"
        )
        .format(
            key=_key_sql(t),
            moved=_tracked(t, "search_terms"),
            terms=t["search_terms"],
            embeddings=t["embeddings"],
        )
        .as_string(None)
    )


@lru_cache(maxsize=64)
def _ids_statement(schema: str) -> str:
    return (
        SQL("SELECT memory_id FROM {} WHERE partition = %(partition)s AND user_id = %(user)s")
        .format(Tables(schema)["search_terms"])
        .as_string(None)
    )


def read_vector_key(reads: Reads, user_id: str) -> VectorKey:
    """The user's current `VectorKey` (one short statement)."""
    with reads.pool.connection() as conn:
        row = conn.execute(_key_statement(reads.t.schema), _params(reads, user_id)).fetchone()
    assert row is not None
    return _key(row)


def load_user_vectors(
    reads: Reads, user_id: str, model: str, dim: int, known: UserVectors | None = None
) -> UserVectors:
    """The user's matrix and its key, read in one snapshot.

    `known`: the user's previous matrix (of this model and size): when the tables are the
    same, only the rows changed since it was read are read, and only the vectors of those
    whose revision changed are opened. A row whose vector is written between two refreshes
    is pending in the first and read by the next (its stamp changed the key).
    """
    schema = reads.t.schema
    params: dict[str, Any] = {**_params(reads, user_id), "model": model}
    changed = known is not None
    if known is not None:
        params |= {"since": known.key.terms_position, "pending": list(known.pending)}
    with reads.pool.connection() as conn, conn.cursor(binary=True) as cur:
        rows = cur.execute(_rows_statement(schema, changed), params).fetchall()
        key = _key(rows[0])
        if known is not None and not key.follows(known.key):  # a rebuild: read every row
            changed, known = False, None
            rows = cur.execute(_rows_statement(schema, False), params).fetchall()
            key = _key(rows[0])
        skip = _KEY_COLUMNS + changed
        found = [r[skip:] for r in rows if r[skip] is not None]
        base = known if known is not None else empty(key, dim)
        removed: set[UUID] = set()
        present = rows[0][_KEY_COLUMNS] if changed else None
        if present is not None and present < len(base.present | {r[0] for r in found}):
            ids = {r[0] for r in cur.execute(_ids_statement(schema), params).fetchall()}
            removed = {m for m in base.present if m not in ids}
    opened = _opened(reads, [r for r in found if _needs_vector(r, base)], dim)
    return merged(base, key, [r[:9] for r in found], opened, removed)


def _needs_vector(row: Sequence[Any], base: UserVectors) -> bool:
    """Has a vector that `base` does not hold at this revision."""
    if not row[8]:
        return False
    at = base.index.get(row[0])
    return at is None or int(base.revisions[at]) != row[1]


def _opened(
    reads: Reads, rows: Sequence[Sequence[Any]], dim: int
) -> dict[UUID, tuple[bytes, bytes]]:
    """memory id -> its opened vector and hubness (left out: the key is gone, another size)."""
    seal = reads.t.seal
    if rows:
        seal.prefetch(r[0] for r in rows)
    sizes = vector_size(dim)
    opened = {}
    for row in rows:
        memory_id = row[0]
        v = open_vector(seal, memory_id, row[9])
        h = open_vector(seal, memory_id, row[10], "hubness")
        if v is not None and h is not None and (len(v), len(h)) == sizes:
            opened[memory_id] = (v, h)
    return opened
