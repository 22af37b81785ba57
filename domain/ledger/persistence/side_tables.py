"""The side-table statements of a save: data keys, key claims, fingerprints, their shredding,
and the note that announces destroyed keys.

`SideTables(schema)` prepares them once (`pipeline.Statement`); `add` appends a save's
side-table changes to its transaction (`pipeline.Transaction`), each row in its user's
partition. LedgerRecorder puts them after the save's write locks and before its events, so a
memory's key is never committed without its events, and a tombstone never without the key's
destruction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ProgrammingError
from psycopg.sql import SQL, Composable

from domain.ledger.persistence.pipeline import Statement, Transaction, oid
from domain.ledger.persistence.reads import render
from domain.ledger.persistence.revocations import EVERY_KEY
from domain.ledger.persistence.tables import (
    DATA_KEYS,
    FINGERPRINTS,
    KEY_CLAIMS,
    Claim,
    Fingerprint,
    NewDataKey,
    revocation_channel,
    table,
)

__all__ = ["SideTables", "prepare"]


def prepare(template: str, types: str, *tables: Composable) -> Statement:
    """A statement of `template` with `tables` in its `{}`s; `types`: the parameters'
    PostgreSQL types, `$1` first."""
    text = render(SQL(template).format(*tables))
    return Statement(text, tuple(oid(name) for name in types.split()))


class SideTables:
    """The side-table statements of a schema's ledger, prepared once."""

    def __init__(self, schema: str) -> None:
        keys, claims, prints = (table(schema, n) for n in (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS))
        # Every statement names the partition of the rows it writes (persistence/tables.py):
        # on Citus, a user's save touches that one shard.
        self.insert_key = prepare(
            "INSERT INTO {} (key_id, user_id, kind, subject_memory_id, master_key_id, wrapped,"
            " key_check, partition) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            "uuid text text uuid text bytea bytea int4",
            keys,
        )
        self.link_key = prepare(
            "UPDATE {} SET subject_memory_id = $1 WHERE partition = $3 AND key_id = $2",
            "uuid uuid int4",
            keys,
        )
        # Destroying keys announces them on the schema's revocation channel, delivered at
        # commit to every process listening (DataKeyStore.follow_revocations): the ids of the
        # keys destroyed by id, 200 a note (a payload holds at most 8000 bytes), and
        # `EVERY_KEY` for a memory's or a user's keys (those of candidates about the memory,
        # all of a user's): their listeners drop every cached key. The note is its own
        # statement, which names no table: on Citus the coordinator sends it. (A NOTIFY in
        # the DELETE's statement ran on the worker holding the shard, which refuses it in a
        # distributed transaction: "cannot PREPARE a transaction that has executed LISTEN,
        # UNLISTEN, or NOTIFY"; and its listeners are the coordinator's.)
        self.revocation_channel = revocation_channel(schema)
        self.notify = prepare("SELECT pg_notify($1, $2)", "text text")
        shred = "DELETE FROM {} WHERE partition = $2 AND (%s)"
        self.shred_memories = prepare(
            shred % "key_id = ANY($1) OR subject_memory_id = ANY($1)", "uuid[] int4", keys
        )
        self.shred_keys = prepare(shred % "key_id = ANY($1)", "uuid[] int4", keys)
        self.shred_user_keys = prepare(shred % "user_id = ANY($1)", "text[] int4", keys)
        self.insert_claim = prepare(
            "INSERT INTO {} (claim, memory_id, user_id, key_id, key_check, partition)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            "text uuid text uuid bytea int4",
            claims,
        )
        self.release_claims = prepare(
            "DELETE FROM {} WHERE partition = $2 AND memory_id = ANY($1)", "uuid[] int4", claims
        )
        self.shred_user_claims = prepare(
            "DELETE FROM {} WHERE partition = $2 AND user_id = ANY($1)", "text[] int4", claims
        )
        self.upsert_print = prepare(
            "INSERT INTO {} (candidate_id, user_id, fingerprint, subject_memory_id, state,"
            " changed_at, key_id, key_check, partition)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (partition, candidate_id) DO UPDATE"
            " SET state = EXCLUDED.state, changed_at = EXCLUDED.changed_at,"
            " subject_memory_id = COALESCE(EXCLUDED.subject_memory_id, {}.subject_memory_id)",
            "uuid text text uuid text timestamptz uuid bytea int4",
            prints,
            prints,
        )
        self.shred_memory_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND subject_memory_id = ANY($1)",
            "uuid[] int4",
            prints,
        )
        self.prune_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND state <> 'pending' AND changed_at < $1",
            "timestamptz int4",
            prints,
        )
        self.shred_user_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND user_id = ANY($1)", "text[] int4", prints
        )

    def add(
        self,
        tx: Transaction,
        *,
        partitions: Mapping[Any, int] | None = None,
        user_partitions: Mapping[str, int] | None = None,
        new_keys: Sequence[NewDataKey] = (),
        link_keys: Sequence[tuple[UUID, UUID]] = (),
        claims: Sequence[Claim] = (),
        fingerprints: Sequence[Fingerprint] = (),
        shred_memories: Sequence[UUID] = (),
        shred_keys: Sequence[UUID] = (),
        shred_users: Sequence[str] = (),
        prune_prints_before: datetime | None = None,
        prune_partitions: Sequence[int] = (),
    ) -> None:
        """Append a save's side-table changes to `tx`, claims last.

        Each side-table row goes to its user's partition: `user_partitions` (user id ->
        partition) for the rows naming a user, `partitions` (aggregate id -> partition) for
        the keys named by aggregate id (`link_keys`, `shred_memories`, `shred_keys`); decided
        fingerprints are pruned in `prune_partitions`. The store resolves them all
        (AggregateStore.save)."""
        by_id, by_user = _Placement(partitions or {}), _Placement(user_partitions or {})
        for key in new_keys:
            tx.add(
                self.insert_key,
                key.key_id,
                key.user_id,
                key.kind,
                key.subject_memory_id,
                key.master_key_id,
                key.wrapped,
                key.key_check,
                by_user[key.user_id],
            )
        for key_id, memory_id in link_keys:
            tx.add(self.link_key, memory_id, key_id, by_id[key_id])
        for p in fingerprints:
            tx.add(
                self.upsert_print,
                p.candidate_id,
                p.user_id,
                p.fingerprint,
                p.subject_memory_id,
                p.state,
                p.changed_at,
                p.key_id,
                p.key_check,
                by_user[p.user_id],
            )
        if prune_prints_before is not None:
            for partition in sorted(set(prune_partitions)):
                tx.add(self.prune_prints, prune_prints_before, partition)
        for partition, ids in by_id.grouped(shred_memories):
            tx.add(self.shred_memories, ids, partition)
            tx.add(self.release_claims, ids, partition)
            tx.add(self.shred_memory_prints, ids, partition)
        for partition, ids in by_id.grouped(shred_keys):
            tx.add(self.shred_keys, ids, partition)
        for partition, users in by_user.grouped(shred_users):
            tx.add(self.shred_user_keys, users, partition)
            tx.add(self.shred_user_claims, users, partition)
            tx.add(self.shred_user_prints, users, partition)
        if shred_memories or shred_users:
            tx.add(self.notify, self.revocation_channel, EVERY_KEY)
        else:
            for first in range(0, len(shred_keys), 200):
                note = ",".join(str(k) for k in shred_keys[first : first + 200])
                tx.add(self.notify, self.revocation_channel, note)
        # Claims last among the side tables: a conflict (or the wait for a concurrent claim of
        # the same key) comes before the partition's head is taken.
        for claim in claims:
            tx.add(
                self.insert_claim,
                claim.claim,
                claim.memory_id,
                claim.user_id,
                claim.key_id,
                claim.key_check,
                by_user[claim.user_id],
            )


class _Placement:
    """Which partition each aggregate id or user id of a save's side-table rows is in."""

    __slots__ = ("_of",)

    def __init__(self, of: Mapping[Any, int]) -> None:
        self._of = of

    def __getitem__(self, name: Any) -> int:
        try:
            return self._of[name]
        except KeyError:
            msg = f"a side-table row of the save has no partition: {name}"
            raise ProgrammingError(msg) from None

    def grouped(self, names: Sequence[Any]) -> list[tuple[int, list[Any]]]:
        """The names by partition, in partition order."""
        groups: dict[int, list[Any]] = {}
        for name in names:
            groups.setdefault(self[name], []).append(name)
        return sorted(groups.items())
