"""Embeddings: one vector per live memory (its key words and content), for hybrid search.

A row per live memory (active or suppressed): `memory_key` (to embed new content with the
key), the `revision` the vector was computed for, the embedder's `model`, the `vector`
(float32 bytes, unit length) and its `hubness` (two float32: the vector's mean cosine to its
ten nearest generic background statements in Latin script, then in CJK script; computed once
here by the embedder's `hubness`, read by search from the user's matrix). Key, vector and
hubness are stored sealed with the memory's data key (`projections.sealed`, opened with
`open_vector`): the hubness is a deterministic function of the content under a public model,
so in the clear it would let anyone holding an old page confirm a guessed content after the
forget. Vector and hubness are NULL when no embedder was available or it failed (search then
ranks that memory lexically), and for a memory whose personal fields were redacted. A content
change re-embeds the memory; forgetting it deletes the row. The texts of a batch are embedded
in one call (a batch-sized model call, not one per event).

The projection runs in a worker of its own, in small batches (api/bootstrap.py): embedding is
slow, and must hold back neither the other projections nor a forget behind it. Rows left
without a vector (the embedder was off or failing) are filled later by `backfill`, a few at a
time, from the memory's content in search_terms at the same revision, whenever the worker is
caught up and the embedder answers. Every change of a user's vectors renews their stamp in
`embedding_stamps` (read by retrieval/vectors/matrix.py: a cached matrix under an older stamp
is refreshed from the changed rows before it is used), and a forget removes the memory's row
from the matrices cached in this process at once (`PassageEmbedder.vectors_forgotten`), so
search never scores with vectors that changed or were deleted.

The embedder is injected (api/bootstrap.py): any `PassageEmbedder`, in production
`retrieval.vectors.service.EmbeddingService`. How a vector is stored (`to_bytes`, `from_bytes`)
and the text a memory is embedded from (`passage_text`): projections/views/vectors.py.

Vectors are personal data derived from content: they live here only, are never logged,
audited or exported, and go with the memory when it is forgotten. Changing the model needs
`memledger projections rebuild embeddings`, which fills every vector with progress; until
then search uses the vectors it has (of the configured model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from psycopg import Connection, Cursor
from psycopg.sql import SQL, Composed, Literal

from domain.model.events import REDACTED
from projections.base import Projection
from projections.envelope import Envelope
from projections.memory_kinds import CONTENT as _CONTENT
from projections.memory_kinds import CREATED as _CREATED
from projections.memory_kinds import FORGOTTEN as _FORGOTTEN
from projections.memory_kinds import MEMORY_KINDS as _KINDS
from projections.sealed import RowSeal, vacuum_promptly
from projections.tracking import Tables
from projections.views._memory_rows import MEMORY_ID
from projections.views._rows import Column, ReadSource, RowChanges, TableLayout
from projections.views.search_terms import TABLE_NAME as SEARCH_TERMS
from projections.views.vectors import PassageEmbedder, Vectors, passage_text, to_bytes

__all__ = ["BACKFILL_BATCH", "COLUMNS", "STAMPS", "Embeddings", "open_vector", "stored_vectors"]

TABLE_NAME: Final = "embeddings"
STAMPS: Final = "embedding_stamps"
"""Per user, a random stamp renewed whenever their vectors change (the matrix cache's key)."""


def open_vector(
    seal: RowSeal, memory_id: UUID, sealed: bytes | None, column: str = "vector"
) -> bytes | None:
    """The `to_bytes` form of a stored vector (or of its hubness: `column`), or None (none
    stored, or the key is gone)."""
    return seal.open_bytes(TABLE_NAME, memory_id, memory_id, column, sealed)


def _sealed(seal: RowSeal, memory_id: UUID, column: str, vector: Vectors) -> bytes | None:
    return seal.seal_bytes(TABLE_NAME, memory_id, memory_id, column, to_bytes(vector)) or None


BACKFILL_BATCH = 32
"""Memories embedded per backfill step (about a second with the bundled model)."""

TABLE = TableLayout(
    MEMORY_ID,
    (
        Column("user_id", "text"),
        Column("memory_key", "bytea"),
        Column("revision", "int4"),
        Column("model", "text", nullable=True),
        Column("vector", "bytea", nullable=True),
        Column("hubness", "bytea", nullable=True),
    ),
)
COLUMNS = TABLE.names
_NO_VECTOR: Final = {"model": None, "vector": None, "hubness": None}


class Embeddings(Projection):
    """The embeddings projection; `service` None (or one that is off) stores no vectors."""

    name = "embeddings"

    def __init__(self, service: PassageEmbedder | None = None) -> None:
        self.service = service

    @property
    def partitionable(self) -> bool:
        """Rows only (no embedder) replay anywhere; a model stays in the process that loaded it."""
        return self.service is None or self.service.model_id is None

    def create(self, t: Tables) -> list[Composed]:
        table = t["embeddings"]
        return [
            TABLE.create(table),
            vacuum_promptly(table),
            t.create_index("embeddings", "user", "(user_id)"),
            t.create_index("embeddings", "missing", "(memory_id) WHERE vector IS NULL"),
            # Not one of `tables`: a rebuild neither rebuilds nor compares it (stamps are random);
            # the matrix key holds the embeddings table's identity for a swap.
            SQL(
                "CREATE TABLE IF NOT EXISTS {} (user_id text NOT NULL, stamp uuid NOT NULL,"
                " partition int NOT NULL, PRIMARY KEY (partition, user_id))"
            ).format(_stamps(t)),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        table = t["embeddings"]
        partition = batch[0].partition
        rows = TABLE.changes(table, partition)
        texts: dict[UUID, tuple[str | None, str]] = {}  # to embed: (key if unknown, content)
        users: set[str] = set()
        forgotten: dict[str, set[UUID]] = {}
        for envelope in batch:
            event = envelope.event
            kind = _KINDS(type(event))
            key = envelope.originator_id
            if kind == _CREATED:
                rows.insert(
                    key,
                    {
                        "user_id": event.user_id,
                        "memory_key": event.memory_key,
                        "revision": 1,
                        "model": None,
                        "vector": None,
                        "hubness": None,
                    },
                )
                texts[key] = (event.memory_key, event.content)
            elif kind == _CONTENT:
                rows.change(key, {"revision": event.revision, **_NO_VECTOR})
                known = rows.new.get(key)
                texts[key] = (known["memory_key"] if known else None, event.content)
            elif kind == _FORGOTTEN:
                rows.delete(key)
                texts.pop(key, None)
                forgotten.setdefault(event.user_id, set()).add(key)
            else:
                continue
            users.add(event.user_id)
        seal = t.seal
        self._embed(cur, table, rows, texts, seal)
        for memory_id, row in rows.new.items():
            row["memory_key"] = seal.seal(
                TABLE_NAME, memory_id, memory_id, "memory_key", row["memory_key"]
            )
        rows.flush(cur)
        self._changed(cur, t, partition, users, forgotten)

    def _changed(
        self,
        cur: Cursor[Any],
        t: Tables,
        partition: int,
        users: set[str],
        forgotten: Mapping[str, set[UUID]] | None = None,
    ) -> None:
        """New stamps for these users of one partition (a cached matrix is refreshed from the
        changed rows at its next search), and the forgotten memories' rows removed from cached
        matrices at once.

        Not while rebuilding into fresh tables (`t.suffix`): nobody reads those yet, and the
        swap changes the embeddings table's identity, which every matrix key holds.
        """
        if not users or t.suffix:
            return
        cur.execute(
            SQL(
                "INSERT INTO {} (user_id, stamp, partition) SELECT u, gen_random_uuid(), %s::int"
                " FROM unnest(%s::text[]) u"
                " ON CONFLICT (partition, user_id) DO UPDATE SET stamp = EXCLUDED.stamp"
            ).format(_stamps(t)),
            (partition, sorted(users)),
        )
        if self.service is not None and forgotten:
            self.service.vectors_forgotten(t.schema, forgotten)

    def backfill(self, conn: Connection[Any], t: Tables) -> int:
        """Embed up to BACKFILL_BATCH memories stored without a vector; returns how many.

        Their text comes from search_terms at the row's revision (a memory whose content
        changed since, or that is gone, waits for its own event; a redacted one is never
        embedded). The embedder runs outside any transaction; a vector is written only if the
        row still has no vector at that revision and the memory is still there.
        """
        service = self.service
        model = service.model_id if service is not None else None
        if service is None or model is None or not service.available:
            return 0
        table = t["embeddings"]
        found = conn.execute(
            SQL(
                "SELECT e.memory_id, e.revision, s.memory_key, s.content, e.partition"
                " FROM {} e JOIN {} s ON s.partition = e.partition"
                " AND s.memory_id = e.memory_id AND s.revision = e.revision"
                " WHERE e.vector IS NULL AND s.memory_key <> '' AND s.content <> ''"
                " ORDER BY e.memory_id LIMIT %s"
            ).format(table, t["search_terms"]),
            (BACKFILL_BATCH,),
        ).fetchall()
        seal = t.seal
        seal.prefetch(row[0] for row in found)
        opened = []
        for memory_id, revision, sealed_key, sealed_content, partition in found:
            key = seal.open(SEARCH_TERMS, memory_id, memory_id, "memory_key", sealed_key)
            content = seal.open(SEARCH_TERMS, memory_id, memory_id, "content", sealed_content)
            if REDACTED not in (key, content):
                opened.append((memory_id, revision, key, content, partition))
        if not opened:
            return 0
        texts = [passage_text(key, content) for _, _, key, content, _ in opened]
        vectors = service.passages(texts)
        hubness = service.hubness(vectors) if vectors is not None else None
        if vectors is None or hubness is None:
            return 0  # failing: tried again once the service retries
        by_partition: dict[int, list[tuple[Any, ...]]] = {}
        for row, vector, hub in zip(opened, vectors, hubness, strict=True):
            memory_id, revision, partition = row[0], row[1], row[4]
            by_partition.setdefault(partition, []).append(
                (
                    memory_id,
                    revision,
                    _sealed(seal, memory_id, "vector", vector),
                    _sealed(seal, memory_id, "hubness", hub),
                )
            )
        updated = 0
        with conn.transaction(), conn.cursor() as cur:
            # One statement per partition: each one shard's (on Citus, one node's).
            for partition, rows in sorted(by_partition.items()):
                ids, revisions, sealed_vectors, sealed_hubness = map(list, zip(*rows, strict=True))
                cur.execute(
                    SQL(
                        "UPDATE {0} e SET model = %s, vector = u.vector, hubness = u.hubness"
                        " FROM unnest(%s::uuid[], %s::int4[], %s::bytea[], %s::bytea[])"
                        " AS u(id, revision, vector, hubness)"
                        " WHERE e.partition = %s AND e.memory_id = u.id"
                        " AND e.revision = u.revision AND e.vector IS NULL"
                        " AND EXISTS (SELECT 1 FROM {1} s WHERE s.partition = e.partition"
                        "  AND s.memory_id = e.memory_id AND s.revision = e.revision)"
                        " RETURNING e.user_id"
                    ).format(table, t["search_terms"]),
                    (model, ids, revisions, sealed_vectors, sealed_hubness, partition),
                )
                returned = cur.fetchall()
                updated += len(returned)
                users = {row[0] for row in returned}
                self._changed(cur, t, partition, users)
        return updated

    def _embed(
        self,
        cur: Cursor[Any],
        table: Composed,
        rows: RowChanges,
        texts: dict[UUID, tuple[str | None, str]],
        seal: RowSeal,
    ) -> None:
        """Fill the vectors of the batch's new and changed memories, in one embedder call."""
        service = self.service
        if service is None or service.model_id is None or not texts:
            return
        unknown = [key for key, (memory_key, _) in texts.items() if memory_key is None]
        keys: dict[UUID, str] = {}
        if unknown:  # content changed on an older memory: its key is in the stored row
            cur.execute(
                SQL(
                    "SELECT memory_id, memory_key FROM {} WHERE partition = %s"
                    " AND memory_id = ANY(%s)"
                ).format(table),
                (rows.partition, unknown),
            )
            keys = {
                memory_id: seal.open(TABLE_NAME, memory_id, memory_id, "memory_key", memory_key)
                for memory_id, memory_key in cur.fetchall()
            }
        wanted: list[tuple[UUID, str]] = []
        for key, (memory_key, content) in texts.items():
            memory_key = memory_key or keys.get(key)
            if memory_key is not None and REDACTED not in (memory_key, content):
                wanted.append((key, passage_text(memory_key, content)))
        vectors = service.passages([text for _, text in wanted]) if wanted else None
        hubness = service.hubness(vectors) if vectors is not None else None
        if vectors is None or hubness is None:
            return  # off or failing: the rows keep no vector (`backfill` fills them later)
        for (key, _), vector, hub in zip(wanted, vectors, hubness, strict=True):
            rows.change(
                key,
                {
                    "model": service.model_id,
                    "vector": _sealed(seal, key, "vector", vector),
                    "hubness": _sealed(seal, key, "hubness", hub),
                },
            )


def _stamps(t: Tables) -> Composed:
    return Tables(t.schema)[STAMPS]  # always the live table, also during a rebuild


def stored_vectors(src: ReadSource) -> int:
    """How many vectors the live table holds (0 before it exists): what a rebuild without an
    embedder would throw away."""
    qualified = SQL("format('%%I.%%I', {}, {})").format(
        Literal(src.t.schema), Literal(src.t.name("embeddings"))
    )
    [found] = src.all(SQL("SELECT to_regclass({}) IS NOT NULL AS found").format(qualified), ())
    if not found["found"]:
        return 0
    query = SQL("SELECT count(*) AS n FROM {} WHERE vector IS NOT NULL")
    [row] = src.all(query.format(src.t["embeddings"]), ())
    return int(row["n"])
