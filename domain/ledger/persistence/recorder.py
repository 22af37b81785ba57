"""The events recorder, extended to write key, claim and fingerprint rows in the same transaction.

A save passes its side-table rows as keyword arguments to `insert_events` (see `_transaction`),
which writes them in the transaction that inserts the events. So a memory's key is never committed
without its events, and a tombstone never without the key's destruction.

Every save that writes a user's aggregates names their write locks (`user_locks`) and takes
them shared, first thing in its transaction. `with recorder.exclusive(lock_id):` holds one
exclusively for a whole command (erase, forget): no other save of that user commits meanwhile,
and the command's own saves, on this thread, run on the session that holds it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.persistence import (
    IntegrityError,
    Notification,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.sql import SQL, Composable, Identifier, Literal

from domain.context import on_outage
from domain.ledger.persistence import partitions as partitioning
from domain.ledger.persistence import pipeline, reads, rekey, routing, upgrade
from domain.ledger.persistence.notifier import Notifier
from domain.ledger.persistence.pipeline import Statement, oid
from domain.ledger.persistence.pool import persistence_error, pinned, with_connection
from domain.ledger.persistence.reads import render
from domain.ledger.persistence.revocations import EVERY_KEY
from domain.ledger.persistence.sealed_state import clear_json
from domain.ledger.persistence.tables import (
    DATA_KEYS,
    FINGERPRINTS,
    KEY_CLAIMS,
    STALE_KEY_CONSTRAINTS,
    Claim,
    Fingerprint,
    NewDataKey,
    create_statements,
    revocation_channel,
    table,
)
from domain.ledger.positions import pack

__all__ = ["LedgerRecorder", "Transaction", "lost_claim", "record", "stale_key"]


class Transaction:
    """The statements of one write, in order, each with its parameters."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[Statement, tuple[Any, ...]]] = []

    def add(self, statement: Statement, *params: Any) -> None:
        """Append one statement; `params` fill its placeholders in order."""
        self.steps.append((statement, params))


class LedgerRecorder(PostgresApplicationRecorder):
    """PostgresApplicationRecorder plus the write-side tables of the ledger.

    A save is one transaction sent as one pipeline of prepared statements (see
    `pipeline`): side tables first, then the events, each taking its partition's head. One
    round trip; it commits whole or not at all, and leaves the connection idle either way.
    """

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema or "public"
        # The library's events table, led by the partition (Citus distributes by it), and
        # without its UNIQUE index on notification_id alone (Citus refuses a unique index
        # without the distribution column): partitions.events_table, event_indexes.
        self.sql_create_statements[self.create_table_statement_index] = partitioning.events_table(
            schema, self.events_table_name, datastore.originator_id_type
        )
        self.sql_create_statements = [
            statement
            for statement in self.sql_create_statements
            if self.notification_id_index_name not in statement.as_string(None)
        ]
        self.sql_create_statements.extend(create_statements(schema))
        keys, claims, prints = (table(schema, n) for n in (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS))

        def prepare(template: str, types: str, *tables: Composable) -> Statement:
            # `types`: the parameters' PostgreSQL types, `$1` first.
            text = render(SQL(template).format(*tables))
            return Statement(text, tuple(oid(name) for name in types.split()))

        # Advisory locks, shared by saves, exclusive for erase and forget (see `exclusive`).
        self._lock_user = prepare("SELECT pg_advisory_xact_lock_shared($1)", "int8")
        # Every statement names the partition of the rows it writes (persistence/tables.py):
        # on Citus, a user's save touches that one shard.
        self._insert_key = prepare(
            "INSERT INTO {} (key_id, user_id, kind, subject_memory_id, master_key_id, wrapped,"
            " key_check, partition) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            "uuid text text uuid text bytea bytea int4",
            keys,
        )
        self._link_key = prepare(
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
        self._notify = prepare("SELECT pg_notify($1, $2)", "text text")
        shred = "DELETE FROM {} WHERE partition = $2 AND (%s)"
        self._shred_memories = prepare(
            shred % "key_id = ANY($1) OR subject_memory_id = ANY($1)", "uuid[] int4", keys
        )
        self._shred_keys = prepare(shred % "key_id = ANY($1)", "uuid[] int4", keys)
        self._shred_user_keys = prepare(shred % "user_id = ANY($1)", "text[] int4", keys)
        self._insert_claim = prepare(
            "INSERT INTO {} (claim, memory_id, user_id, key_id, key_check, partition)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            "text uuid text uuid bytea int4",
            claims,
        )
        self._release_claims = prepare(
            "DELETE FROM {} WHERE partition = $2 AND memory_id = ANY($1)", "uuid[] int4", claims
        )
        self._shred_user_claims = prepare(
            "DELETE FROM {} WHERE partition = $2 AND user_id = ANY($1)", "text[] int4", claims
        )
        self._upsert_print = prepare(
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
        self._shred_memory_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND subject_memory_id = ANY($1)",
            "uuid[] int4",
            prints,
        )
        self._prune_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND state <> 'pending' AND changed_at < $1",
            "timestamptz int4",
            prints,
        )
        self._shred_user_prints = prepare(
            "DELETE FROM {} WHERE partition = $2 AND user_id = ANY($1)", "text[] int4", prints
        )
        # Each event at its partition's next position (persistence/partitions.py: the head
        # row's lock orders a partition's commits, where the library locks the whole events
        # table); the workers are woken after the commit (persistence/notifier.py).
        self.notifier = Notifier(datastore, self.channel_name)
        insert_event, types = partitioning.insert_event(
            schema, self.events_table_name, datastore.originator_id_type
        )
        self._insert_event = Statement(
            render(insert_event), tuple(oid(name) for name in types.split())
        )
        self._sql_partition = render(partitioning.select_partition(schema, self.events_table_name))
        self._sql_heads = render(partitioning.select_heads(schema))
        self._sql_legacy = render(
            SQL(
                "SELECT max(position) AS position FROM {}.{}"
                " WHERE partition = %s AND notification_id <= %s"
            ).format(Identifier(schema), Identifier(self.events_table_name))
        )
        self.sql_create_statements.extend(
            partitioning.create_statements(
                schema,
                self.events_table_name,
                getattr(datastore, "partitions", partitioning.DEFAULT_PARTITIONS),
            )
        )
        # Two processes running this DDL at once (starting together on a new schema, or on
        # one of the release before partitions) would deadlock: each holds the SHARE lock of
        # a CREATE INDEX on the events table and waits for the other's to take the ALTER's.
        # So the transaction first waits, however long, for any other's to commit.
        self.sql_create_statements[:0] = [
            SQL("SELECT set_config('lock_timeout', {}, true)").format(Literal("0")),
            SQL("SELECT pg_advisory_xact_lock({})").format(Literal(_ddl_lock(schema))),
        ]
        self.partitions = 0
        """How many partitions the ledger has (read from its heads by `create_table`)."""

        self._sql_having_topics = render(
            SQL(
                "SELECT DISTINCT originator_id FROM {}.{} WHERE originator_id = ANY(%s)"
                " AND topic = ANY(%s)"
            ).format(Identifier(datastore.schema), Identifier(self.events_table_name))
        )
        # What the last DDL statement makes (the partitions' statements go after the side
        # tables'): a ledger of the release before partitions has the side tables'
        # LAST_CREATED but not this, and gets the partition columns and heads.
        self._sql_last_created = render(
            SQL(
                "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = {} AND c.relname = {}"
            ).format(Literal(schema), Literal(partitioning.unplaced_index(self.events_table_name)))
        )
        # The clear part is read only for the topics asked for (CASE: not for other events).
        self._sql_originators = render(
            SQL(
                "SELECT DISTINCT originator_id, topic FROM {}.{} WHERE partition = %s"
                " AND topic = ANY(%s)"
                " AND CASE WHEN topic = ANY(%s) THEN {} ->> 'user_id' END = %s"
            ).format(
                Identifier(datastore.schema),
                Identifier(self.events_table_name),
                clear_json(Identifier("state")),
            )
        )

    def create_table(self) -> None:
        """The library's DDL, unless the schema already holds all it creates.

        Its CREATE INDEX IF NOT EXISTS takes a SHARE lock on the table even when the index
        exists, so a process starting beside a server under write load (a CLI command) would
        queue behind the saves and could deadlock with them.
        """
        if reads.fetch_all(self.datastore, self._sql_last_created, ()):
            self.datastore.register_type_adapters()
        else:
            super().create_table()
        self.partitions = len(self.heads())

    def upgrade(self, partition_of: Callable[[str], int]) -> int:
        """Place the events written before partitions existed in their users' partitions
        (`partition_of`: a user id's partition); how many were placed, 0 once done
        (persistence/upgrade.py). Then key the tables of the release before issue 27 by
        partition (persistence/rekey.py)."""
        placed = upgrade.place(self.datastore, self.events_table_name, partition_of)
        rekey.rekey(self.datastore, self.events_table_name, partition_of)
        return placed

    def heads(self) -> dict[int, int]:
        """Every partition's last position within it (0: empty)."""
        rows = reads.fetch_all(self.datastore, self._sql_heads, ())
        return {int(row["partition"]): int(row["position"]) for row in rows}

    def legacy_position(self, partition: int, notification_id: int) -> int:
        """The partition's last position among events whose notification id (the global
        position before partitions) is at most `notification_id` (0: none)."""
        rows = reads.fetch_all(self.datastore, self._sql_legacy, (partition, notification_id))
        return int(rows[0]["position"] or 0) if rows else 0

    def read_partition(
        self,
        partition: int,
        after: int,
        limit: int,
        *,
        until: int | None = None,
        topics: Sequence[str] = (),
    ) -> list[Notification]:
        """At most `limit` events of one partition after its position `after` (up to `until`
        when given; of these topics when given), in order; each notification's `id` is the
        event's ledger position (domain/ledger/positions.py)."""
        wanted = list(topics) or None
        params = (partition, after, until, until, wanted, wanted, limit)
        rows = reads.fetch_all(self.datastore, self._sql_partition, params)
        return [
            Notification(
                id=pack(partition, int(row["position"])),
                originator_id=row["originator_id"],
                originator_version=row["originator_version"],
                topic=row["topic"],
                state=bytes(row["state"]),
            )
            for row in rows
        ]

    def originators(
        self, partition: int, user_id: str, topics: Sequence[str]
    ) -> list[tuple[UUID, str]]:
        """(originator id, topic) of every event of these topics whose `user_id` is the user's.

        Reads the user's whole partition (`partition`: every aggregate of a user is in the
        user's; no index on a sealed state): for rare commands only.
        """
        rows = reads.fetch_all(
            self.datastore, self._sql_originators, (partition, topics, topics, user_id)
        )
        return [(UUID(str(row["originator_id"])), row["topic"]) for row in rows]

    def having_topics(self, originator_ids: list[UUID], topics: Sequence[str]) -> set[UUID]:
        """Which of these originators have an event of one of these topics (by the events
        table's primary key: one index probe an originator)."""
        if not originator_ids:
            return set()
        rows = reads.fetch_all(self.datastore, self._sql_having_topics, (originator_ids, topics))
        return {UUID(str(row["originator_id"])) for row in rows}

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """The library's read of one aggregate's events, in the partition of the enclosing
        `routing.within` when there is one (one shard on Citus; persistence/routing.py)."""
        partition = routing.current()
        if partition is None:
            found: Sequence[StoredEvent] = super().select_events(
                originator_id, gt=gt, lte=lte, desc=desc, limit=limit
            )
            return found
        return routing.select_events_in(
            self, partition, originator_id, gt=gt, lte=lte, desc=desc, limit=limit
        )

    @on_outage
    def insert_events(
        self, stored_events: Sequence[StoredEvent], **changes: Any
    ) -> Sequence[int] | None:
        """Write the events and the side-table changes in one transaction and one round trip.

        Returns the events' ledger positions (None when there were no events): the events go
        to `partition` (the partition of the user whose aggregates they are). A claim conflict
        raises an IntegrityError whose cause keeps the constraint's name.
        """
        # The library's own save path (taken with an aggregate cache or snapshots) passes the
        # tracking of a process application, which the ledger is not: always None here.
        if changes.pop("tracking", None) is not None:
            raise ProgrammingError("the ledger records no tracking")
        partitions: Mapping[Any, int] = changes.pop("partitions", {})
        try:
            placed = sorted(
                ((partitions[e.originator_id], i) for i, e in enumerate(stored_events)),
            )
        except KeyError:
            raise ProgrammingError("an event's aggregate has no partition") from None
        transaction = self._transaction(
            [(p, stored_events[i]) for p, i in placed], partitions=partitions, **changes
        )
        if not transaction.steps:
            return None
        steps = transaction.steps
        results = with_connection(self.datastore, lambda conn: pipeline.run(conn, steps))
        if not stored_events:
            return None
        self.notifier.notify()
        positions = self._positions(results, placed)
        return [positions[i] for i in range(len(stored_events))]

    @contextmanager
    def exclusive(self, lock_id: int) -> Iterator[None]:
        """Hold a user's write lock exclusively until the exit; this thread's saves meanwhile
        run on the session that holds it (they take it shared too, which it already has).

        Waits for the user's saves in flight (`lock_timeout` at most: OperationalError).
        """
        with pinned(self.datastore) as conn:
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (lock_id,), prepare=False)
            except psycopg.Error as e:
                raise persistence_error(e) from e
            try:
                yield
            finally:
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,), prepare=False)
                except psycopg.Error:
                    conn.close()  # the lock goes with the session; the pool drops the connection

    def _transaction(
        self,
        stored_events: Sequence[tuple[int, StoredEvent]],
        *,
        partitions: Mapping[Any, int] | None = None,
        user_partitions: Mapping[str, int] | None = None,
        user_locks: Sequence[int] = (),
        new_keys: Sequence[NewDataKey] = (),
        link_keys: Sequence[tuple[UUID, UUID]] = (),
        claims: Sequence[Claim] = (),
        fingerprints: Sequence[Fingerprint] = (),
        shred_memories: Sequence[UUID] = (),
        shred_keys: Sequence[UUID] = (),
        shred_users: Sequence[str] = (),
        prune_prints_before: datetime | None = None,
        prune_partitions: Sequence[int] = (),
    ) -> Transaction:
        """The statements of one save: side tables first, then the events, each
        with its partition, in partition order (so saves spanning partitions take their
        heads in one order: no deadlock).

        Each side-table row goes to its user's partition: `user_partitions` (user id ->
        partition) for the rows naming a user, `partitions` (aggregate id -> partition) for
        the keys named by aggregate id (`link_keys`, `shred_memories`, `shred_keys`); decided
        fingerprints are pruned in `prune_partitions`. The store resolves them all
        (AggregateStore.save)."""
        by_id, by_user = _Placement(partitions or {}), _Placement(user_partitions or {})
        tx = Transaction()
        # First: a save waits here while its user is being erased or a memory forgotten.
        for lock_id in sorted(user_locks):
            tx.add(self._lock_user, lock_id)
        for key in new_keys:
            tx.add(
                self._insert_key,
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
            tx.add(self._link_key, memory_id, key_id, by_id[key_id])
        for p in fingerprints:
            tx.add(
                self._upsert_print,
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
                tx.add(self._prune_prints, prune_prints_before, partition)
        for partition, ids in by_id.grouped(shred_memories):
            tx.add(self._shred_memories, ids, partition)
            tx.add(self._release_claims, ids, partition)
            tx.add(self._shred_memory_prints, ids, partition)
        for partition, ids in by_id.grouped(shred_keys):
            tx.add(self._shred_keys, ids, partition)
        for partition, users in by_user.grouped(shred_users):
            tx.add(self._shred_user_keys, users, partition)
            tx.add(self._shred_user_claims, users, partition)
            tx.add(self._shred_user_prints, users, partition)
        if shred_memories or shred_users:
            tx.add(self._notify, self.revocation_channel, EVERY_KEY)
        else:
            for first in range(0, len(shred_keys), 200):
                note = ",".join(str(k) for k in shred_keys[first : first + 200])
                tx.add(self._notify, self.revocation_channel, note)
        # Claims last among the side tables: a conflict (or the wait for a concurrent claim of
        # the same key) comes before the partition's head is taken.
        for claim in claims:
            tx.add(
                self._insert_claim,
                claim.claim,
                claim.memory_id,
                claim.user_id,
                claim.key_id,
                claim.key_check,
                by_user[claim.user_id],
            )
        if stored_events:
            for partition, e in stored_events:
                tx.add(
                    self._insert_event,
                    e.originator_id,
                    e.originator_version,
                    e.topic,
                    e.state,
                    partition,
                )
        return tx

    def _positions(
        self, results: Sequence[Any], placed: Sequence[tuple[int, int]]
    ) -> dict[int, int]:
        """Each inserted event's ledger position, by its index in the save (the inserts come
        last, in `placed` order: (partition, index))."""
        ids = [int(r.get_value(0, 0)) for r in results[-len(placed) :] if r.ntuples == 1]
        if len(ids) != len(placed):
            msg = f"got {len(ids)} positions for {len(placed)} events"
            raise ProgrammingError(msg)
        return {i: pack(p, local) for (p, i), local in zip(placed, ids, strict=True)}


_CONSTRAINT_IN_MESSAGE = re.compile(r'constraint "([^"]+)"')
_SHARD_SUFFIX = re.compile(r"_\d+$")


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


def _ddl_lock(schema: str) -> int:
    """The advisory lock id of the ledger's DDL in this schema."""
    digest = hashlib.sha256(f"memledger/{schema}/ledger-ddl".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def record(
    application: Application[UUID], aggregates: Sequence[Any], changes: Mapping[str, Any]
) -> int | None:
    """Map the aggregates' pending events and insert them with the changes; the position.

    The library's `save` does the same through ProcessingEvent, Recording and Notification
    objects and its notify hooks, none of which the ledger uses; this path writes the very same
    stored events (same mapper, topics and format). With an aggregate cache or snapshots
    configured, the library's path runs instead (it keeps them up to date).
    """
    if application.repository.cache is not None or application.snapshots is not None:
        recordings = application.save(*aggregates, **changes)
        return recordings[-1].notification.id if recordings else None
    to_stored = application.mapper.to_stored_event
    stored = [to_stored(event) for a in aggregates for event in a.collect_events()]
    ids = application.recorder.insert_events(stored, **changes)
    return ids[-1] if ids else None


def lost_claim(error: IntegrityError) -> bool:
    """True when the save lost a key claim to another memory (psycopg's diagnostics name the
    claim table's own unique constraints)."""
    constraint = _constraint(error)
    return constraint.startswith(KEY_CLAIMS) and constraint not in STALE_KEY_CONSTRAINTS


def stale_key(error: IntegrityError) -> bool:
    """True when the save hashed under a key that is no longer the live one (destroyed, or
    destroyed and made again): the command must run again with the key read afresh."""
    return _constraint(error) in STALE_KEY_CONSTRAINTS


def _constraint(error: IntegrityError) -> str:
    """The name of the constraint a write violated.

    On Citus the error comes from the worker holding the shard: the coordinator passes on its
    message but not the constraint's name, and that name is the shard's (the table's with
    `_<shard id>` appended): so it is read from the message, and the suffix dropped (issue 27;
    met on the loopback cluster: tests/domain/ledger/test_saving.py pins the parsing)."""
    diag = getattr(error.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", "") or ""
    if not name:
        found = _CONSTRAINT_IN_MESSAGE.search(getattr(diag, "message_primary", "") or "")
        name = _SHARD_SUFFIX.sub("", found.group(1)) if found else ""
    return name
