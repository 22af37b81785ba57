"""Outages against a real server: kill -9 under write load, PostgreSQL restarted and stopped
under load, the projections process killed mid-batch, pools exhausted by blocked requests.

Each scenario checks: no acknowledged write lost, no 500, every request answered within
the configured deadline (+ slack), recovery without restarting the server within 5 s of
PostgreSQL being back, and projections equal to a fresh rebuild. Its own PostgreSQL cluster
(tests/faults/cluster.py): the shared server is never stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from tests.faults.cluster import PrivateCluster
from tests.faults.harness import (
    BOUND,
    SLACK,
    Call,
    FaultServer,
    Load,
    acknowledged_writes_kept,
    at_heads,
    check_calls,
    create,
    projections_rebuilt,
    timed,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

RECOVERY = 5.0
"""Seconds from PostgreSQL accepting connections again to a write and its read-back served."""


def caught_up(server: FaultServer) -> bool:
    with server.client("ops") as client:
        call, body = timed(client, "GET", "/readyz")
    return call.status == 200 and not any(body["projection_lag"].values())


def applied(cluster: PrivateCluster, schema: str) -> int:
    """The sum of the projections' positions (grows with every batch committed)."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT coalesce(sum(position), 0) FROM {}").format(
                sql.Identifier(schema, "memledger_projection_tracking")
            )
        ).fetchone()
    return int(row[0]) if row else 0


def recovery_seconds(server: FaultServer) -> float:
    """Seconds until a write and the read of it (waiting for the projections) are served."""

    def served() -> bool:
        with server.client("probe") as client:
            call, body = create(client)
            if call.status not in (200, 201):
                return False
            read = timed(client, "GET", f"/me/core-memories/{body['memory_id']}")[0]
            return read.status == 200

    return until(served, timeout=RECOVERY + 10)


@dataclass
class Scenario:
    """What a scenario works with: servers to make, the cluster, the schema, the master key."""

    make_server: Callable[..., FaultServer]
    cluster: PrivateCluster
    schema: str
    master_key: str

    def finish(self, server: FaultServer) -> None:
        """Wait for the projections to catch up, stop the server, compare with a rebuild."""
        until(lambda: caught_up(server), timeout=30)
        server.stop()
        projections_rebuilt(self.cluster.url, self.schema, self.master_key)


@pytest.fixture
def scenario(
    make_server: Callable[..., FaultServer],
    cluster: PrivateCluster,
    fault_schema: str,
    master_key: str,
) -> Scenario:
    return Scenario(make_server, cluster, fault_schema, master_key)


def test_a_server_killed_under_write_load_loses_no_acknowledged_write(scenario: Scenario) -> None:
    server = scenario.make_server()
    server.start()
    with Load(server, writers=4, readers=1) as load:
        time.sleep(2.0)
        server.kill()
        server.start()  # same port, same schema: the clients carry on
        time.sleep(1.5)
    check_calls(load.calls, server_down=True, server=server)
    acknowledged_writes_kept(server, load.acknowledged)
    scenario.finish(server)


def test_postgres_restarted_then_down_for_10_s_under_load(scenario: Scenario) -> None:
    server = scenario.make_server()
    server.start()
    with Load(server, writers=3, readers=2) as load:
        time.sleep(1.5)
        scenario.cluster.restart()
        restarted = recovery_seconds(server)
        time.sleep(0.5)
        scenario.cluster.stop()
        down_until = time.monotonic() + 10.0
        during: list[Call] = []
        with server.client("writer0") as client:  # what a client sees meanwhile
            while time.monotonic() < down_until:
                during.append(create(client)[0])
                during.append(timed(client, "GET", "/me/core-memories")[0])
        scenario.cluster.start()
        recovered = recovery_seconds(server)
        time.sleep(1.0)
    check_calls(load.calls + during, server=server)
    assert {c.status for c in during} == {503}, {c.status for c in during}
    assert restarted <= RECOVERY and recovered <= RECOVERY, (restarted, recovered)
    acknowledged_writes_kept(server, load.acknowledged)
    scenario.finish(server)


def test_the_projections_process_killed_mid_run_resumes_to_a_rebuilds_tables(
    scenario: Scenario,
) -> None:
    server = scenario.make_server("serve", "--no-worker")
    projections = scenario.make_server("projections", "run")
    projections.start(ready=False)
    server.start()
    with Load(server, writers=4, readers=0) as load:
        for pause in (0.1, 0.4, 0.7):
            before = applied(scenario.cluster, scenario.schema)
            until(
                lambda b=before: applied(scenario.cluster, scenario.schema) > b,
                timeout=60,
                step=0.05,
            )
            time.sleep(pause)
            projections.kill()  # mid-run: under this load batches follow each other
            projections.start(ready=False)
        time.sleep(1.0)
    check_calls(load.calls, server=server)
    acknowledged_writes_kept(server, load.acknowledged)
    # The reads above are access records the server writes after them, and as it stops: only
    # then is the ledger still, for the projections process to catch up with.
    server.stop()
    until(lambda: at_heads(scenario.cluster.url, scenario.schema), timeout=30)
    projections.stop()
    projections_rebuilt(scenario.cluster.url, scenario.schema, scenario.master_key)


def test_exhausted_pools_answer_503_in_time_and_healthz_at_once(scenario: Scenario) -> None:
    server = scenario.make_server()
    server.start()
    with server.client("writer0") as client:
        assert create(client)[0].status == 201
    blocked: list[Call] = []
    health: list[float] = []
    # Sixty users, one request each: the pools run out, not one user's concurrency (429).
    clients = [server.client(f"writer{i}") for i in range(60)]

    def request(i: int) -> None:
        client = clients[i]
        call = create(client)[0] if i % 4 == 0 else timed(client, "GET", "/me/core-memories")[0]
        blocked.append(call)

    with psycopg.connect(scenario.cluster.url) as locker:  # reads and writes block on these locks
        for table in ("memledger_active_memories", "memledger_events"):
            locker.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(scenario.schema, table)
                )
            )
        threads = [threading.Thread(target=request, args=(i,)) for i in range(60)]
        for thread in threads:
            thread.start()
        with server.client("ops") as ops:
            for _ in range(5):
                time.sleep(0.3)
                call = timed(ops, "GET", "/healthz")[0]
                assert call.status == 200
                health.append(call.seconds)
        for thread in threads:
            thread.join(timeout=BOUND + 35)
        locker.rollback()
    for client in clients:
        client.close()
    check_calls(blocked)
    assert len(blocked) == 60 and {c.status for c in blocked} == {503}, {c.status for c in blocked}
    assert max(health) < 1.0, health
    with server.client("writer0") as client:  # the locks gone, everything answers again
        assert until(lambda: create(client)[0].status == 201, timeout=BOUND + SLACK) < BOUND
    scenario.finish(server)
