"""Adding capacity online: a third worker joins and shards move onto it while eight writers
save through a running server (docs/cluster.md, "Adding a worker").

During a move Citus copies a shard by logical replication and then, for a moment, blocks
writes to it while it switches over: a save waiting there past the statement timeout answers
503 with Retry-After, which the writers retry. Afterwards every acknowledged write is there
exactly once, the projections equal a fresh rebuild, no request answered 500, and every worker
holds shards.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.citus.cluster import CitusCluster
from tests.e2e.test_server_e2e import free_port
from tests.faults.harness import (
    Call,
    FaultServer,
    Load,
    acknowledged_writes_kept,
    check_calls,
    create,
    projections_rebuilt,
    server_env,
    timed,
    until_answered,
)

pytestmark = [pytest.mark.integration, pytest.mark.citus]


def shards_per_node(url: str, schema: str) -> dict[int, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.nodeport, count(*) FROM citus_shards s JOIN pg_class c"
            " ON c.oid = s.table_name JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s GROUP BY 1",
            (schema,),
        ).fetchall()
    return {int(port): int(count) for port, count in rows}


class Forgetter(threading.Thread):
    """Creates and forgets memories, and reads the audit trail, until stopped: forgets and
    audit reads go on while shards move. Keeps every call, and the ids it forgot (410 after)."""

    def __init__(self, server: FaultServer) -> None:
        super().__init__(daemon=True)
        self.server, self.calls, self.forgotten = server, list[Call](), list[str]()
        self.stop = threading.Event()

    def run(self) -> None:
        with (
            self.server.client("forgetter") as user,
            self.server.client("audrey", roles=["auditor"]) as auditor,
        ):
            while not self.stop.is_set():
                call, body = create(user)
                self.calls.append(call)
                if call.status in (200, 201):
                    gone, _ = timed(user, "DELETE", f"/me/core-memories/{body['memory_id']}")
                    self.calls.append(gone)
                    if gone.status == 204:
                        self.forgotten.append(body["memory_id"])
                self.calls.append(timed(auditor, "GET", "/audit/events", params={"limit": 20})[0])
                self.stop.wait(0.05)


def test_a_worker_added_under_eight_writers_takes_shards_and_loses_nothing(
    cluster: CitusCluster, pg_schema: str, master_key: str, tmp_path: Path
) -> None:
    before = shards_per_node(cluster.url, pg_schema)
    assert len(before) == len(cluster.nodes) - 1  # the workers; the coordinator holds none
    server = FaultServer(
        server_env(cluster.url, pg_schema, master_key, tmp_path / "data"),
        free_port(),
        tmp_path / "serve.log",
    )
    server.start()
    forgetter = Forgetter(server)
    try:
        forgetter.start()
        with Load(server, writers=8, readers=1) as load:
            time.sleep(2.0)
            added = cluster.add_worker(free_port())
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                conn.execute("SELECT citus_rebalance_start()")
                conn.execute("SELECT citus_rebalance_wait()")
                jobs: list[Any] = conn.execute(
                    "SELECT state FROM citus_rebalance_status() ORDER BY job_id DESC LIMIT 1"
                ).fetchall()
            time.sleep(1.0)  # writes after the moves too
        forgetter.stop.set()
        forgetter.join(timeout=60)
        assert jobs and jobs[0][0] == "finished", jobs
        check_calls(load.calls, server=server)
        check_calls([c for c in forgetter.calls if c.status != 204], server=server)
        assert forgetter.forgotten, "no forget went through"
        with server.client("forgetter") as user:
            for memory_id in forgetter.forgotten:
                assert user.get(f"/me/core-memories/{memory_id}").status_code == 410
        acknowledged_writes_kept(server, load.acknowledged)
        for user in sorted({user for user, _ in load.acknowledged}):
            ids: list[str] = []
            cursor = None
            with server.client(user) as client:
                while True:
                    params: dict[str, Any] = {"limit": 200} | ({"cursor": cursor} if cursor else {})
                    page = until_answered(client, "/me/core-memories", params)
                    ids += [item["memory_id"] for item in page["items"]]
                    if not (cursor := page["next_cursor"]):
                        break
            assert len(ids) == len(set(ids))  # each exactly once
            mine = {memory_id for who, memory_id in load.acknowledged if who == user}
            assert mine <= set(ids)
        after = shards_per_node(cluster.url, pg_schema)
        assert added.port in after and len(after) == len(cluster.nodes) - 1
        assert all(count > 0 for count in after.values()), after
    finally:
        server.kill()
    projections_rebuilt(cluster.url, pg_schema, master_key)
