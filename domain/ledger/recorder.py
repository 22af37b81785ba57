"""The events recorder, extended to write key, claim and fingerprint rows in the same transaction.

`MemoryLedger.save(..., **changes)` passes these keyword arguments through the library to
`_insert_events`, which runs inside the transaction that inserts the events. So a memory's key
is never committed without its events, and a tombstone never without the key's destruction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from domain.ledger.keystore import NewDataKey
from domain.ledger.tables import DATA_KEYS, FINGERPRINTS, KEY_CLAIMS, create_statements, table

__all__ = ["Claim", "Fingerprint", "LedgerRecorder"]

_BEGIN: Final = b"BEGIN"
_COMMIT: Final = b"COMMIT"


def _render(statement: Any) -> bytes:
    """A library statement (composed SQL) as the bytes psycopg would send."""
    return statement if isinstance(statement, bytes) else bytes(statement.as_bytes(None))


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
        # Rendered once: composing SQL on every save costs more than the statements themselves.
        for name in (
            "_insert_key",
            "_link_key",
            "_shred_memories",
            "_shred_keys",
            "_shred_user_keys",
            "_insert_claim",
            "_release_claims",
            "_shred_user_claims",
            "_upsert_print",
            "_shred_memory_prints",
            "_shred_user_prints",
        ):
            setattr(self, name, getattr(self, name).as_bytes(None))
        self._lock_statements = [_render(s) for s in self.lock_table_statements]
        self._notify_statement = (
            SQL("NOTIFY {}").format(Identifier(self.channel_name)).as_bytes(None)
        )
        self.insert_events_statement = _render(self.insert_events_statement)  # type: ignore[assignment]
        # Most saves append one event: a plain VALUES row with the state sent as binary bytea
        # spares dumping a composite array as escaped text (the library's unnest statement).
        self._insert_one_event = (
            SQL(
                "INSERT INTO {}.{} (originator_id, originator_version, topic, state)"
                " VALUES (%s, %s, %s, %b) RETURNING notification_id"
            )
            .format(Identifier(datastore.schema), Identifier(self.events_table_name))
            .as_bytes(None)
        )

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Write one transaction in one round trip: BEGIN ... COMMIT pipelined before one Sync.

        The library's version waits for the server several times (BEGIN, the statements, its
        own sync, the COMMIT, the pipeline's last sync), holding the events table's EXCLUSIVE
        lock across most of them. Here BEGIN, the side-table statements, the lock, NOTIFY, the
        events INSERT ... RETURNING and COMMIT go out together, so the lock is held only while
        the server runs them. On an error the server skips the rest up to the Sync (COMMIT
        included), psycopg raises the first error (a claim conflict keeps its diag), and the
        aborted transaction is rolled back before the connection goes back to the pool.
        """
        with self.datastore.get_connection() as conn:
            curs, events = conn.cursor(), conn.cursor()
            try:
                with conn.pipeline():
                    curs.execute(_BEGIN, prepare=False)
                    self._insert_events(curs, stored_events, **kwargs)
                    if stored_events:
                        self._insert_stored_events(events, stored_events, **kwargs)
                    curs.execute(_COMMIT, prepare=False)
                # Leaving the pipeline sent the one Sync and raised the first error, if any.
                if not stored_events:
                    return None
                return self._fetch_ids_after_insert_events(events, stored_events, **kwargs)
            except BaseException:
                if (
                    conn.pgconn.status == ConnStatus.OK
                    and conn.info.transaction_status != TransactionStatus.IDLE
                ):
                    with contextlib.suppress(psycopg.Error):
                        conn.rollback()
                raise
            finally:
                curs.close()
                events.close()

    def _insert_stored_events(
        self, curs: Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        if len(stored_events) != 1:
            super()._insert_stored_events(curs, stored_events, **kwargs)
            return
        (event,) = stored_events
        self._lock_table(curs)
        self._notify_channel(curs)
        curs.execute(
            self._insert_one_event,
            (event.originator_id, event.originator_version, event.topic, event.state),
            prepare=True,
        )

    def _lock_table(self, curs: Cursor[DictRow]) -> None:
        # LOCK TABLE ... IN EXCLUSIVE MODE, as the library does (see its comment): notification
        # ids must commit in the order they were issued, or a tailing reader could skip some.
        for statement in self._lock_statements:
            curs.execute(statement, prepare=True)

    def _notify_channel(self, curs: Cursor[DictRow]) -> None:
        curs.execute(self._notify_statement, prepare=True)

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
