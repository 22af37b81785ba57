"""The events recorder, extended to write key, claim and fingerprint rows in the same transaction.

A save passes its side-table rows as keyword arguments to `insert_events` (see `_transaction`),
which writes them (persistence/side_tables.py) in the transaction that inserts the events. So a
memory's key is never committed without its events, and a tombstone never without the key's
destruction. Which constraint a failed save violated: persistence/violations.py.

Every save that writes a user's aggregates names their write locks (`user_locks`) and takes
them shared, first thing in its transaction. `with recorder.exclusive(lock_id):` holds one
exclusively for a whole command (erase, forget): no other save of that user commits meanwhile,
and the command's own saves, on this thread, run on the session that holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.persistence import Notification, ProgrammingError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.sql import SQL, Identifier

from domain.context import on_outage
from domain.ledger.persistence import ddl, pipeline, reads, rekey, routing, upgrade
from domain.ledger.persistence import partitions as partitioning
from domain.ledger.persistence.notifier import Notifier
from domain.ledger.persistence.pipeline import Statement, Transaction, oid
from domain.ledger.persistence.pool import persistence_error, pinned, with_connection
from domain.ledger.persistence.reads import render
from domain.ledger.persistence.sealed_state import clear_json
from domain.ledger.persistence.side_tables import SideTables, prepare
from domain.ledger.persistence.violations import lost_claim, stale_key
from domain.ledger.positions import pack

__all__ = ["LedgerRecorder", "Transaction", "lost_claim", "record", "stale_key"]


class LedgerRecorder(PostgresApplicationRecorder):
    """PostgresApplicationRecorder plus the write-side tables of the ledger.

    A save is one transaction sent as one pipeline of prepared statements (see
    `pipeline`): side tables first, then the events, each taking its partition's head. One
    round trip; it commits whole or not at all, and leaves the connection idle either way.

    Events are read by partition (`read_partition`, `heads`): the library's global
    `select_notifications` and `max_notification_id` see only events written before
    partitions, which alone carry a notification id (partitions.insert_event).
    """

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema or "public"
        # The library's DDL reworked for partitions, plus the side tables' (persistence/ddl.py).
        self.sql_create_statements = ddl.create_statements(
            self, schema, getattr(datastore, "partitions", partitioning.DEFAULT_PARTITIONS)
        )
        # Advisory locks, shared by saves, exclusive for erase and forget (see `exclusive`).
        self._lock_user = prepare("SELECT pg_advisory_xact_lock_shared($1)", "int8")
        # The side-table rows of a save, between its locks and its events.
        self.side_tables = SideTables(schema)
        self.revocation_channel = self.side_tables.revocation_channel
        # Each event at its partition's next position (persistence/partitions.py: the head
        # row's lock orders a partition's commits, where the library locks the whole events
        # table); the workers are woken after the commit (persistence/notifier.py).
        self.notifier = Notifier(datastore, self.channel_name)
        bump, bump_types, insert, insert_types = partitioning.insert_event(
            schema, self.events_table_name, datastore.originator_id_type
        )
        self._bump_head = Statement(render(bump), tuple(oid(n) for n in bump_types.split()))
        self._insert_event = Statement(render(insert), tuple(oid(n) for n in insert_types.split()))
        self._sql_partition = render(partitioning.select_partition(schema, self.events_table_name))
        self._sql_heads = render(partitioning.select_heads(schema))
        self._sql_legacy = render(
            SQL(
                "SELECT max(position) AS position FROM {}.{}"
                " WHERE partition = %s AND notification_id <= %s"
            ).format(Identifier(schema), Identifier(self.events_table_name))
        )
        self.partitions = 0
        """How many partitions the ledger has (read from its heads by `create_table`)."""

        self._sql_having_topics = render(
            SQL(
                "SELECT DISTINCT originator_id FROM {}.{} WHERE originator_id = ANY(%s)"
                " AND topic = ANY(%s)"
            ).format(Identifier(datastore.schema), Identifier(self.events_table_name))
        )
        self._sql_last_created = ddl.last_created(schema, self.events_table_name)
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
        found: Sequence[StoredEvent]
        if partition is None:
            found = super().select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        else:
            found = routing.select_events_in(
                self, partition, originator_id, gt=gt, lte=lte, desc=desc, limit=limit
            )
        return found

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
        user_locks: Sequence[int] = (),
        **changes: Any,
    ) -> Transaction:
        """The statements of one save: the user's write locks, then the side tables
        (`changes`: SideTables.add), then the events, each with its partition, in partition
        order (so saves spanning partitions take their heads in one order: no deadlock)."""
        tx = Transaction()
        # First: a save waits here while its user is being erased or a memory forgotten.
        for lock_id in sorted(user_locks):
            tx.add(self._lock_user, lock_id)
        self.side_tables.add(tx, **changes)
        if stored_events:
            for partition, e in stored_events:
                tx.add(self._bump_head, partition)
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
        """Each inserted event's ledger position, by its index in the save (the events come
        last, in `placed` order: (partition, index), each a head's UPDATE and the INSERT
        returning the position)."""
        ids = [int(r.get_value(0, 0)) for r in results[-2 * len(placed) :] if r.ntuples == 1]
        if len(ids) != len(placed):
            msg = f"got {len(ids)} positions for {len(placed)} events"
            raise ProgrammingError(msg)
        return {i: pack(p, local) for (p, i), local in zip(placed, ids, strict=True)}


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
