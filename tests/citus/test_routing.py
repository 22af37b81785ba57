"""On Citus, a user's aggregate load runs on the one shard of the user's partition, and a
load without the partition would ask every shard (persistence/routing.py)."""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg.sql import SQL

from domain.ledger.ledger import MemoryLedger
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
