"""The events recorder, extended to write key, claim and fingerprint rows in the same transaction.

`MemoryLedger._save(..., **changes)` passes these keyword arguments to `insert_events`, which
writes them in the transaction that inserts the events. So a memory's key is never committed
without its events, and a tombstone never without the key's destruction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg import ClientCursor
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg.rows import DictRow
from psycopg.sql import SQL, Composable, Identifier

from domain.ledger.keystore import NewDataKey
from domain.ledger.tables import DATA_KEYS, FINGERPRINTS, KEY_CLAIMS, create_statements, table

__all__ = ["Claim", "Fingerprint", "LedgerRecorder", "Transaction"]

_EVENT_ROW: Final = b"(%s, %s, %s, %s)"


def _render(statement: object) -> bytes:
    """A library statement (bytes, str or composed SQL) as the bytes psycopg would send."""
    if isinstance(statement, bytes):
        return statement
    if isinstance(statement, str):
        return statement.encode()
    if isinstance(statement, Composable):
        return bytes(statement.as_bytes(None))
    raise TypeError(f"cannot render {type(statement).__name__} as a statement")


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


class Transaction:
    """The statements of one write, in order, with their parameters (`%s` placeholders)."""

    __slots__ = ("params", "statements")

    def __init__(self) -> None:
        self.statements: list[bytes] = []
        self.params: list[Any] = []

    def add(self, statement: bytes, *params: Any) -> None:
        """Append one statement; `params` fill its placeholders in order."""
        self.statements.append(statement)
        self.params.extend(params)


class LedgerRecorder(PostgresApplicationRecorder):
    """PostgresApplicationRecorder plus the write-side tables of the ledger.

    A save is sent as one multi-statement query (simple query protocol, parameters bound by
    psycopg on the client): PostgreSQL runs such a query as one implicit transaction, commits
    it when the last statement succeeds and rolls all of it back on the first error. So a
    save costs one round trip, no BEGIN/COMMIT messages, and leaves the connection idle
    whatever happens, without a ROLLBACK that would deallocate the prepared reads.
    """

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema or "public"
        self.sql_create_statements.extend(create_statements(schema))
        keys, claims, prints = (table(schema, n) for n in (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS))

        def render(template: str, *tables: Composable) -> bytes:
            # Rendered once: composing SQL on every save costs more than the statements.
            return _render(SQL(template).format(*tables))

        self._insert_key = render(
            "INSERT INTO {} (key_id, user_id, kind, subject_memory_id, master_key_id, wrapped)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            keys,
        )
        self._link_key = render("UPDATE {} SET subject_memory_id = %s WHERE key_id = %s", keys)
        self._shred_memories = render(
            "DELETE FROM {} WHERE key_id = ANY(%s) OR subject_memory_id = ANY(%s)", keys
        )
        self._shred_keys = render("DELETE FROM {} WHERE key_id = ANY(%s)", keys)
        self._shred_user_keys = render("DELETE FROM {} WHERE user_id = ANY(%s)", keys)
        self._insert_claim = render(
            "INSERT INTO {} (claim, memory_id, user_id) VALUES (%s, %s, %s)", claims
        )
        self._release_claims = render("DELETE FROM {} WHERE memory_id = ANY(%s)", claims)
        self._shred_user_claims = render("DELETE FROM {} WHERE user_id = ANY(%s)", claims)
        self._upsert_print = render(
            "INSERT INTO {} (candidate_id, user_id, fingerprint, subject_memory_id, state,"
            " changed_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (candidate_id) DO UPDATE"
            " SET state = EXCLUDED.state, changed_at = EXCLUDED.changed_at,"
            " subject_memory_id = COALESCE(EXCLUDED.subject_memory_id, {}.subject_memory_id)",
            prints,
            prints,
        )
        self._shred_memory_prints = render(
            "DELETE FROM {} WHERE subject_memory_id = ANY(%s)", prints
        )
        self._shred_user_prints = render("DELETE FROM {} WHERE user_id = ANY(%s)", prints)
        # SET LOCAL lock_timeout, then LOCK TABLE ... IN EXCLUSIVE MODE, as the library does
        # (see its _lock_table): notification ids must commit in the order they were issued,
        # or a tailing reader could skip some. Then NOTIFY the projection worker.
        self._before_events = [_render(s) for s in self.lock_table_statements] + [
            render("NOTIFY {}", Identifier(self.channel_name))
        ]
        self._insert_events_head = render(
            "INSERT INTO {}.{} (originator_id, originator_version, topic, state) VALUES ",
            Identifier(datastore.schema),
            Identifier(self.events_table_name),
        )

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **changes: Any
    ) -> Sequence[int] | None:
        """Write the events and the side-table changes in one transaction and one round trip.

        Returns the events' notification ids (None when there were no events). A claim
        conflict raises an IntegrityError whose cause keeps the constraint's name.
        """
        transaction = self._transaction(stored_events, **changes)
        if not transaction.statements:
            return None
        query = b"; ".join(transaction.statements)
        with self.datastore.get_connection() as conn:
            try:
                with ClientCursor(conn) as curs:
                    curs.execute(query, transaction.params)
                    if not stored_events:
                        return None
                    while curs.nextset():  # the events INSERT ... RETURNING comes last
                        pass
                    return self._notification_ids(curs, stored_events)
            except BaseException:
                # The server already rolled the implicit transaction back; this only matters
                # if the connection was left in a transaction some other way.
                if (
                    conn.pgconn.status == ConnStatus.OK
                    and conn.info.transaction_status != TransactionStatus.IDLE
                ):
                    with contextlib.suppress(psycopg.Error):
                        conn.rollback()
                raise

    def _transaction(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        new_keys: Sequence[NewDataKey] = (),
        link_keys: Sequence[tuple[UUID, UUID]] = (),
        claims: Sequence[Claim] = (),
        fingerprints: Sequence[Fingerprint] = (),
        shred_memories: Sequence[UUID] = (),
        shred_keys: Sequence[UUID] = (),
        shred_users: Sequence[str] = (),
    ) -> Transaction:
        """The statements of one save: side tables first, then lock, notify and events."""
        tx = Transaction()
        for key in new_keys:
            tx.add(
                self._insert_key,
                key.key_id,
                key.user_id,
                key.kind,
                key.subject_memory_id,
                key.master_key_id,
                key.wrapped,
            )
        for key_id, memory_id in link_keys:
            tx.add(self._link_key, memory_id, key_id)
        for p in fingerprints:
            tx.add(
                self._upsert_print,
                p.candidate_id,
                p.user_id,
                p.fingerprint,
                p.subject_memory_id,
                p.state,
                p.changed_at,
            )
        if shred_memories:
            ids = list(shred_memories)
            tx.add(self._shred_memories, ids, ids)
            tx.add(self._release_claims, ids)
            tx.add(self._shred_memory_prints, ids)
        if shred_keys:
            tx.add(self._shred_keys, list(shred_keys))
        if shred_users:
            users = list(shred_users)
            tx.add(self._shred_user_keys, users)
            tx.add(self._shred_user_claims, users)
            tx.add(self._shred_user_prints, users)
        # Claims last among the side tables: a conflict (or the wait for a concurrent claim of
        # the same key) comes before the events table's lock is taken.
        for claim in claims:
            tx.add(self._insert_claim, claim.claim, claim.memory_id, claim.user_id)
        if stored_events:
            for statement in self._before_events:
                tx.add(statement)
            rows = b", ".join([_EVENT_ROW] * len(stored_events))
            tx.add(self._insert_events_head + rows + b" RETURNING notification_id")
            for e in stored_events:
                tx.params += (e.originator_id, e.originator_version, e.topic, e.state)
        return tx

    @staticmethod
    def _notification_ids(
        curs: ClientCursor[DictRow], stored_events: Sequence[StoredEvent]
    ) -> list[int]:
        ids = [row["notification_id"] for row in curs.fetchall()]
        if len(ids) != len(stored_events):
            msg = f"got {len(ids)} notification ids for {len(stored_events)} events"
            raise ProgrammingError(msg)
        return ids
