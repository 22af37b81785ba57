"""Upgrade in place (issue 27): the views of the release before it given their partition.

A schema of that release is made by writing and projecting with today's code, then turning
its projection tables back into that release's own (`as_before_partitioned_views`: its CREATE
statements, rows kept less their partition). Starting the projections of this release must
give every table the partition column and keys a fresh schema has (the same catalog), the
partition of each row that a fresh projection gives it (`position & 1023`, or the ledger's
partition of the row's user), project nothing again, change nothing when run again, and the
worker must go on to rows equal to a fresh projection of the ledger.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import partition_of
from domain.model.values import Scope
from projections import repartition
from projections.quarantine import QUARANTINE
from projections.reads import Reads
from projections.registry import all_projections
from projections.tracking import TRACKING, Tables, read_positions
from projections.upgrade import EVENTS
from projections.worker import ProjectionWorker, ensure_tables
from tests.projections.old_views import as_before_partitioned_views
from tests.projections.test_projection_batches import busy_ledger, snapshot
from tests.projections.test_upgrade import _fresh, _views

Catalog = dict[str, tuple[Any, ...]]
LOGICAL = repartition.logical_tables(n for p in all_projections() for n in p.tables)


def catalog(conn: psycopg.Connection[Any], schema: str) -> Catalog:
    """Per table: its columns (name, type, not null) in order, its primary key's columns and
    its unique indexes' columns."""
    found: Catalog = {}
    tables = conn.execute(
        "SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname = ANY(%s)",
        (schema, [Tables(schema).name(n) for n in LOGICAL]),
    ).fetchall()
    for oid, name in tables:
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute"
            " WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        ).fetchall()
        keys = conn.execute(
            "SELECT i.indisprimary, array(SELECT a.attname::text FROM unnest(i.indkey)"
            " WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = k.n ORDER BY k.o)"
            " FROM pg_index i WHERE i.indrelid = %s AND i.indisunique ORDER BY 1, 2",
            (oid,),
        ).fetchall()
        found[name] = (tuple(columns), tuple((p, tuple(k)) for p, k in keys))
    return found


def _quarantine_old(conn: psycopg.Connection[Any], t: Tables) -> int:
    """One quarantined event in the old table (no partition); returns its position."""
    row = conn.execute(
        sql.SQL(
            "INSERT INTO {} (projection, position, originator_id, version, topic, error_class)"
            " SELECT 'tombstones', position * 1024 + partition, originator_id,"
            " originator_version, topic, 'Boom' FROM {} ORDER BY notification_id DESC LIMIT 1"
            " RETURNING position"
        ).format(t[QUARANTINE], t[EVENTS])
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_the_views_of_the_release_before_are_given_their_partitions_in_place(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    database_url: str,
    pg_schema: str,
    clock: Any,
) -> None:
    t = Tables(pg_schema)
    busy_ledger(ledger, clock)
    ledger.create_memory(
        "carol", scope=Scope.global_(), memory_key="late", content="tea, no milk", category="fact"
    )
    worker.catch_up()
    assert len({ledger.partition(u) for u in ("alice", "bob", "carol")}) > 1
    with psycopg.connect(database_url, autocommit=True) as conn:
        expected, fresh_catalog = snapshot(conn, t), catalog(conn, pg_schema)
        tracked = read_positions(conn, t)
        assert len(fresh_catalog) == len(LOGICAL) == 14
        for name, (columns, keys) in fresh_catalog.items():  # partition: last, keys: first
            assert name == t.name(TRACKING) or columns[-1][0] == "partition", name
            assert keys and all(columns[0] == "partition" for _, columns in keys), name
        as_before_partitioned_views(conn, t)
        quarantined = _quarantine_old(conn, t)
        old = catalog(conn, pg_schema)
        assert old != fresh_catalog
        assert [n for n, (c, _) in old.items() if "partition" in {x[0] for x in c}] == [
            t.name(TRACKING)
        ]

    # Rows known by their user only cannot be placed without the ledger's partition of a user.
    with pytest.raises(repartition.MissingPartitionOf):
        ensure_tables(worker.pool, pg_schema, all_projections())

    ensure_tables(worker.pool, pg_schema, all_projections(), partition_of=ledger.partition)
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert catalog(conn, pg_schema) == fresh_catalog
        assert snapshot(conn, t) == expected  # every row, with the partition it had
        assert read_positions(conn, t) == tracked  # nothing projected again
        partition = conn.execute(
            sql.SQL("SELECT partition FROM {} WHERE position = %s").format(t[QUARANTINE]),
            (quarantined,),
        ).fetchone()
        assert partition == (partition_of(quarantined),)
        with conn.transaction():  # run again: nothing to do
            logical = repartition.logical_tables(n for p in all_projections() for n in p.tables)
            assert repartition.add_partitions(conn, t, logical, None) == []
    ensure_tables(worker.pool, pg_schema, all_projections())  # nor at the next start

    # The worker goes on from there to the rows of a fresh projection; reads find them.
    ledger.create_memory(
        "bob", scope=Scope.global_(), memory_key="later", content="green tea", category="fact"
    )
    worker.catch_up()
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _views(snapshot(conn, t)) == _fresh(conn, ledger, pg_schema)
    reads = Reads(worker.pool, pg_schema, ledger.partition)
    assert {m.memory_key for m in reads.memories("bob").items} >= {"later"}
    assert reads.user_revision("carol") == 1
