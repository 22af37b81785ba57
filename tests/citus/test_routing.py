"""On Citus, a user's aggregate load runs on the one shard of the user's partition (a load
without the partition would ask every shard: persistence/routing.py), and so does each
statement a save writes its events with (persistence/partitions.py, `insert_event`)."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest
from psycopg.sql import SQL, Identifier, Placeholder

from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence import partitions as partitioning
from domain.model.values import Scope

pytestmark = [pytest.mark.integration, pytest.mark.citus]


def tasks(conn: psycopg.Connection, statement: SQL, params: tuple[object, ...]) -> int:
    plan = "\n".join(row[0] for row in conn.execute(SQL("EXPLAIN ") + statement, params))
    found = re.search(r"Task Count: (\d+)", plan)
    assert found, plan
    return int(found.group(1))


def test_the_routed_load_asks_one_shard_and_the_plain_one_every_shard(
    ledger: MemoryLedger, database_url: str
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="a fact", category="fact"
    ).memory
    assert memory is not None
    recorder = ledger.store.recorder()
    plain = recorder.select_events_statement
    with psycopg.connect(database_url) as conn:
        routed = tasks(
            conn, plain + SQL(" AND partition = %s"), (memory.memory_id, ledger.partition("alice"))
        )
        everywhere = tasks(conn, plain, (memory.memory_id,))
        shards = conn.execute(
            "SELECT shard_count FROM citus_tables WHERE table_name = %s::regclass",
            (f"{recorder.datastore.schema}.{recorder.events_table_name}",),
        ).fetchone()
    assert routed == 1
    assert shards is not None and everywhere == shards[0] > 1


def test_a_saves_event_statements_each_run_on_the_partitions_shard(
    ledger: MemoryLedger, database_url: str
) -> None:
    recorder = ledger.store.recorder()
    schema = recorder.datastore.schema
    bump, bump_types, insert, insert_types = partitioning.insert_event(
        schema, recorder.events_table_name, recorder.datastore.originator_id_type
    )
    partition = ledger.partition("alice")
    # Values bound in the client: EXPLAIN EXECUTE takes no server-side parameters.
    with psycopg.connect(database_url, cursor_factory=psycopg.ClientCursor) as conn:
        plans = []
        for name, statement, types, args in [
            ("bump", bump, bump_types, (partition,)),
            ("ins", insert, insert_types, (uuid.uuid4(), 1, "t", b"x", partition)),
        ]:
            conn.execute(
                SQL("PREPARE {} ({}) AS ").format(Identifier(name), SQL(", ".join(types.split())))
                + statement
            )
            placeholders = SQL(", ").join([Placeholder()] * len(args))
            execute = SQL("EXPLAIN EXECUTE {} ({})").format(Identifier(name), placeholders)
            plans.append("\n".join(row[0] for row in conn.execute(execute, args)))
        conn.rollback()
    for plan in plans:  # routed: no intermediate result through the coordinator
        assert "Task Count: 1" in plan and "pull to coordinator" not in plan, plan
