"""Upgrade in place (issue 26): a ledger of the release before partitions, partitioned at start.

The old ledger is made here by writing with today's code, then taking its tables back to the
shape the release before partitions (commit 3199829) left them in (`_as_released_before`): the
events table without `partition`, `position`, `recorded_at` and their indexes, no heads table,
one global tracking row per projection (`memledger_projection_positions`, the last
notification id applied) and global positions in the views' rows and the quarantine. CI has
no checkout of that release; the catalog of a schema made this way (columns with their types,
nullability and defaults, indexes, constraints, per table) was compared once with that of a
ledger written and projected by the release itself (a worktree of 3199829, the same
`busy_ledger`, its worker caught up, then more writes): the same tables, columns, indexes and
constraints, and the same values where that release keeps positions (tracking, audit_log,
profile_changes, search_terms); that real old ledger, upgraded by this code, projected to
rows equal to a fresh projection (2026-12-04).

The upgrade must place every event where a partitioned ledger wrote it (same partition and
position, same heads), twice as much as once, also when two processes start at once; the
projections' tracking and the positions their rows hold must be translated to exactly what
they were before the old shape was made (nothing projected again), and the worker must go on
from there to rows equal to a fresh projection of the ledger; new saves go after the old
events of their partition. (The real old ledger, upgraded, read one event to catch up: the
one written after its worker had caught up.)
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

from domain.ledger.access import AccessEntry
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.partitions import HEADS
from domain.ledger.positions import Legacy, local_of, pack, partition_of
from domain.ledger.sealing import SealingMapper
from domain.model.values import Scope
from projections.envelope import decode_batch
from projections.registry import all_projections, main_projections
from projections.sealed import register
from projections.tracking import LEGACY_TRACKING, TRACKING, Tables, read_positions
from projections.upgrade import EVENTS, LedgerNotPartitioned
from projections.worker import ProjectionWorker, ensure_tables
from tests.projections.old_views import as_before_partitioned_views
from tests.projections.test_projection_batches import busy_ledger, snapshot
from tests.raw_events import number_as_released_before

Rows = dict[str, list[tuple[Any, ...]]]
_POSITION_COLUMNS = {  # the views whose rows hold positions, and the tables holding them
    "active_memories": "active_memories",
    "search_terms": "search_terms",
    "audit_log": "audit_log",
    "profile": "profile_changes",
}


def _placement(conn: psycopg.Connection[Any], t: Tables) -> dict[tuple[Any, int], tuple[int, int]]:
    rows = conn.execute(
        sql.SQL("SELECT originator_id, originator_version, partition, position FROM {}").format(
            t[EVENTS]
        )
    ).fetchall()
    return {(r[0], r[1]): (r[2], r[3]) for r in rows}


def _heads(conn: psycopg.Connection[Any], schema: str) -> dict[int, int]:
    rows = conn.execute(
        sql.SQL("SELECT partition, position FROM {}.{}").format(
            sql.Identifier(schema), sql.Identifier(HEADS)
        )
    ).fetchall()
    return dict(rows)


def _as_released_before(conn: psycopg.Connection[Any], t: Tables, applied: int) -> None:
    """The schema as the release before partitions left it, its projections having applied
    the events up to notification id `applied` (see the module's docstring)."""
    events = t[EVENTS]
    as_before_partitioned_views(conn, t)  # that release's views had no partition either
    with conn.transaction():
        number_as_released_before(conn, t.schema, t.name(EVENTS))
        # Positions in the views and the quarantine: the events' notification ids (negated
        # first: old and new values never meet in a primary key).
        packed = sql.SQL("e.position * 1024 + e.partition")
        for logical in [*_POSITION_COLUMNS.values(), "projection_quarantine"]:
            conn.execute(sql.SQL("UPDATE {} SET position = -position").format(t[logical]))
            conn.execute(
                sql.SQL(
                    "UPDATE {0} AS v SET position = e.notification_id FROM {1} AS e"
                    " WHERE {2} = -v.position"
                ).format(t[logical], events, packed)
            )
        conn.execute(sql.SQL("DROP TABLE {}").format(t[TRACKING]))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (projection text PRIMARY KEY, position bigint NOT NULL,"
                " updated_at timestamptz NOT NULL DEFAULT now())"
            ).format(t[LEGACY_TRACKING])
        )
        conn.execute(
            sql.SQL("INSERT INTO {} (projection, position) SELECT unnest(%s::text[]), %s").format(
                t[LEGACY_TRACKING]
            ),
            ([p.name for p in main_projections()], applied),
        )
        conn.execute(
            sql.SQL(
                "ALTER TABLE {} DROP COLUMN partition, DROP COLUMN position,"
                " DROP COLUMN recorded_at"
            ).format(events)
        )
        conn.execute(
            sql.SQL("DROP TABLE {}.{}").format(sql.Identifier(t.schema), sql.Identifier(HEADS))
        )


def _quarantine_legacy(conn: psycopg.Connection[Any], t: Tables, ids: dict[str, int]) -> None:
    """One quarantined event per projection named, at an old global position."""
    for projection, notification_id in ids.items():
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (projection, position, originator_id, version, topic, error_class)"
                " SELECT %s, notification_id, originator_id, originator_version, topic, 'Boom'"
                " FROM {} WHERE notification_id = %s"
            ).format(t["projection_quarantine"], t[EVENTS]),
            (projection, notification_id),
        )


def _fresh(conn: psycopg.Connection[Any], ledger: MemoryLedger, schema: str) -> Rows:
    """Every view projected from the whole ledger into tables of its own, partition by
    partition, by the projections themselves (no worker, no tracking)."""
    t = Tables(schema, f"__fresh{secrets.token_hex(4)}")
    projections = main_projections()
    with conn.transaction():
        for projection in all_projections():
            for statement in projection.create(t):
                conn.execute(statement)
    recorder, mapper = ledger.store.recorder(), _mapper(ledger)
    for partition in range(recorder.partitions):
        batch = decode_batch(mapper, recorder.read_partition(partition, 0, 100_000))
        if batch:
            with conn.transaction(), conn.cursor() as cur:
                for projection in projections:
                    projection.apply(cur, t, batch)
    return _views(snapshot(conn, t))


def _mapper(ledger: MemoryLedger) -> SealingMapper:
    mapper = ledger.mapper
    assert isinstance(mapper, SealingMapper)
    return mapper


def _views(rows: Rows) -> Rows:
    """The tables of the projections that run here (not the embeddings': no embedder)."""
    names = {name for projection in main_projections() for name in projection.tables}
    return {name: found for name, found in rows.items() if name in names}


def _more(ledger: MemoryLedger) -> None:
    """More events after busy_ledger: access records, a user of their own, a change."""
    now = datetime.now(UTC)
    ledger.record_access(
        [AccessEntry("read", "alice", "get", now), AccessEntry("search", "bob", "search", now)]
    )
    ledger.create_memory(
        "carol", scope=Scope.global_(), memory_key="late", content="tea, no milk", category="fact"
    )
    memory_id = ledger.memory_ids("bob")[0]
    revision = ledger.get_memory("bob", memory_id).revision
    ledger.update_memory("bob", memory_id, expected_revision=revision, content="coffee, black")


def _monotonic_recorded_at(conn: psycopg.Connection[Any], t: Tables) -> bool:
    row = conn.execute(
        sql.SQL(
            "SELECT bool_and(recorded_at >= previous) FROM (SELECT recorded_at,"
            " lag(recorded_at) OVER (PARTITION BY partition ORDER BY position) AS previous"
            " FROM {}) AS r WHERE previous IS NOT NULL"
        ).format(t[EVENTS])
    ).fetchone()
    return bool(row and row[0])


def test_a_ledger_of_the_release_before_partitions_is_partitioned_as_if_written_so(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
    clock: Any,
) -> None:
    t = Tables(pg_schema)
    assert t.name(EVENTS) == ledger.store.recorder().events_table_name
    busy_ledger(ledger, clock)
    worker = make_worker(main_projections())
    worker.catch_up()
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The notification id the old release gave the last of them: it numbered events in
        # commit order, as `_as_released_before` does (number_as_released_before).
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(t[EVENTS]))
        applied = row.fetchone()[0]  # type: ignore[index]
        tracked = read_positions(conn, t)
        kept = _views(snapshot(conn, t))
    _more(ledger)  # written, not yet projected
    ledger.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        placed, heads = _placement(conn, t), _heads(conn, pg_schema)
        last_positions = {p: pack(p, local) for p, local in heads.items()}
        _as_released_before(conn, t, applied)
        _quarantine_legacy(conn, t, {"tombstones": 3, "audit_log": 4})
        audit = conn.execute(sql.SQL("SELECT max(position) FROM {}").format(t["audit_log"]))
        assert audit.fetchone() == (applied,)  # the views hold global positions again
        rows = conn.execute(
            sql.SQL("SELECT notification_id, originator_id, originator_version FROM {}").format(
                t[EVENTS]
            )
        ).fetchall()
        old_events = {row[0]: (row[1], row[2]) for row in rows}

    # Projections started first refuse: there are no positions to translate into yet.
    with pytest.raises(LedgerNotPartitioned):
        ensure_tables(worker.pool, pg_schema, all_projections())

    # Two processes start at once: the events are placed once.
    upgraded: list[int] = []
    starts = [
        threading.Thread(target=lambda: upgraded.append(make_ledger().upgraded)) for _ in range(2)
    ]
    for start in starts:
        start.start()
    for start in starts:
        start.join()
    assert sorted(upgraded) == [0, len(placed)]
    again = make_ledger()  # and again: nothing left to place
    assert again.upgraded == 0
    assert again.store.recorder().upgrade(again.partition) == 0
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _placement(conn, t) == placed
        assert _heads(conn, pg_schema) == heads
        assert _monotonic_recorded_at(conn, t)
        # A process of the old release still running can no longer write unplaced events
        # (since issue 27's re-keying the column is NOT NULL: domain/ledger/persistence/rekey.py).
        with pytest.raises(psycopg.errors.NotNullViolation):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (originator_id, originator_version, topic, state)"
                    " VALUES (gen_random_uuid(), 1, 'memledger:Memory.Created', '{{}}')"
                ).format(t[EVENTS])
            )

    # The projections: translated once (a second start finds nothing to do), their rows too.
    register(pg_schema, again.keys)
    upgraded_worker = ProjectionWorker(again, worker.pool, pg_schema, main_projections())
    rewritten = ensure_tables(
        worker.pool, pg_schema, all_projections(), partition_of=again.partition
    )
    assert rewritten == sorted(_POSITION_COLUMNS)
    assert ensure_tables(worker.pool, pg_schema, all_projections()) == []
    with psycopg.connect(database_url, autocommit=True) as conn:
        positions = read_positions(conn, t)
        assert {k: v for k, v in positions.items() if v} == {k: v for k, v in tracked.items() if v}
        assert _views(snapshot(conn, t)) == kept  # the rows, as projected before
        quarantined = conn.execute(
            sql.SQL("SELECT projection, position FROM {} ORDER BY 1").format(
                t["projection_quarantine"]
            )
        ).fetchall()
        placed_now = _placement(conn, t)
        assert quarantined == [
            ("audit_log", pack(*placed_now[old_events[4]])),
            ("tombstones", pack(*placed_now[old_events[3]])),
        ]
        assert not conn.execute(
            "SELECT to_regclass(%s)", (f"{pg_schema}.{t.name(LEGACY_TRACKING)}",)
        ).fetchone()[0]  # type: ignore[index]
        legacy = {p: again.store.recorder().legacy_position(p, applied) for p in heads}
        alice = again.partition("alice")
        assert again.legacy_position("alice", Legacy(applied)) == pack(alice, legacy[alice])
        assert {k: v for k, v in positions.items() if k[0] == "tombstones" and v} == {
            ("tombstones", p): local for p, local in legacy.items() if local
        }

    # ... go on from there to the rows of a fresh projection of the ledger.
    upgraded_worker.catch_up()
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _views(snapshot(conn, t)) == _fresh(conn, again, pg_schema)

    # Reads work, and a save goes after the old events of its partition.
    for memory_id in again.memory_ids("alice"):
        assert again.get_memory("alice", memory_id).user_id == "alice"
    partition = again.partition("carol")
    outcome = again.create_memory(
        "carol", scope=Scope.global_(), memory_key="new", content="green tea", category="fact"
    )
    assert outcome.position == pack(partition, local_of(last_positions[partition]) + 1)
    assert partition_of(outcome.position) == partition
