"""The events recorder, extended to write key, claim and fingerprint rows in the same transaction.

`MemoryLedger.save(..., **changes)` passes these keyword arguments through the library to
`_insert_events`, which runs inside the transaction that inserts the events. So a memory's key
is never committed without its events, and a tombstone never without the key's destruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import Cursor
from psycopg.rows import DictRow
from psycopg.sql import SQL

from domain.ledger.keystore import NewDataKey
from domain.ledger.tables import DATA_KEYS, FINGERPRINTS, KEY_CLAIMS, create_statements, table

__all__ = ["Claim", "Fingerprint", "LedgerRecorder"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A live memory's hold on its keyed (user, scope, key) hash."""

    claim: str
    memory_id: UUID
    user_id: str


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The keyed fingerprint of a candidate's proposal and where the candidate stands."""

    candidate_id: UUID
    user_id: str
    fingerprint: str
    subject_memory_id: UUID | None
    state: str
    changed_at: datetime


class LedgerRecorder(PostgresApplicationRecorder):
    """PostgresApplicationRecorder plus the write-side tables of the ledger."""

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema or "public"
        self.sql_create_statements.extend(create_statements(schema))
        keys, claims, prints = (table(schema, n) for n in (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS))
        self._insert_key = SQL(
            "INSERT INTO {} (key_id, user_id, kind, subject_memory_id, master_key_id, wrapped)"
            " VALUES (%s, %s, %s, %s, %s, %s)"
        ).format(keys)
        self._link_key = SQL("UPDATE {} SET subject_memory_id = %s WHERE key_id = %s").format(keys)
        self._shred_memories = SQL(
            "DELETE FROM {} WHERE key_id = ANY(%s) OR subject_memory_id = ANY(%s)"
        ).format(keys)
        self._shred_keys = SQL("DELETE FROM {} WHERE key_id = ANY(%s)").format(keys)
        self._shred_user_keys = SQL("DELETE FROM {} WHERE user_id = ANY(%s)").format(keys)
        self._insert_claim = SQL(
            "INSERT INTO {} (claim, memory_id, user_id) VALUES (%s, %s, %s)"
        ).format(claims)
        self._release_claims = SQL("DELETE FROM {} WHERE memory_id = ANY(%s)").format(claims)
        self._shred_user_claims = SQL("DELETE FROM {} WHERE user_id = ANY(%s)").format(claims)
        self._upsert_print = SQL(
            "INSERT INTO {} (candidate_id, user_id, fingerprint, subject_memory_id, state,"
            " changed_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (candidate_id) DO UPDATE"
            " SET state = EXCLUDED.state, changed_at = EXCLUDED.changed_at,"
            " subject_memory_id = COALESCE(EXCLUDED.subject_memory_id, {}.subject_memory_id)"
        ).format(prints, prints)
        self._shred_memory_prints = SQL("DELETE FROM {} WHERE subject_memory_id = ANY(%s)").format(
            prints
        )
        self._shred_user_prints = SQL("DELETE FROM {} WHERE user_id = ANY(%s)").format(prints)

    def _insert_events(
        self,
        curs: Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        *,
        new_keys: Sequence[NewDataKey] = (),
        link_keys: Sequence[tuple[UUID, UUID]] = (),
        claims: Sequence[Claim] = (),
        fingerprints: Sequence[Fingerprint] = (),
        shred_memories: Sequence[UUID] = (),
        shred_keys: Sequence[UUID] = (),
        shred_users: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        # Statements are pipelined; a claim conflict surfaces as an IntegrityError on sync.
        for key in new_keys:
            curs.execute(
                self._insert_key,
                (
                    key.key_id,
                    key.user_id,
                    key.kind,
                    key.subject_memory_id,
                    key.master_key_id,
                    key.wrapped,
                ),
                prepare=True,
            )
        for key_id, memory_id in link_keys:
            curs.execute(self._link_key, (memory_id, key_id), prepare=True)
        for print_ in fingerprints:
            curs.execute(
                self._upsert_print,
                (
                    print_.candidate_id,
                    print_.user_id,
                    print_.fingerprint,
                    print_.subject_memory_id,
                    print_.state,
                    print_.changed_at,
                ),
                prepare=True,
            )
        if shred_memories:
            ids = list(shred_memories)
            curs.execute(self._shred_memories, (ids, ids))
            curs.execute(self._release_claims, (ids,))
            curs.execute(self._shred_memory_prints, (ids,))
        if shred_keys:
            curs.execute(self._shred_keys, (list(shred_keys),))
        if shred_users:
            users = list(shred_users)
            curs.execute(self._shred_user_keys, (users,))
            curs.execute(self._shred_user_claims, (users,))
            curs.execute(self._shred_user_prints, (users,))
        for claim in claims:
            curs.execute(
                self._insert_claim, (claim.claim, claim.memory_id, claim.user_id), prepare=True
            )
        super()._insert_events(curs, stored_events, **kwargs)
