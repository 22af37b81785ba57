"""A worker process killed mid-batch and restarted ends with the tables of an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.worker import ProjectionWorker

WORKER = textwrap.dedent(
    """
    import sys
    from psycopg_pool import ConnectionPool
    from api.bootstrap import postgres_env
    from api.settings import Settings
    from domain.ledger.keyring import MasterKeyring
    from domain.ledger.ledger import MemoryLedger
    from projections.registry import all_projections
    from projections.worker import ProjectionWorker
    url, schema, key = sys.argv[1:4]
    ledger = MemoryLedger(postgres_env(Settings(database_url=url, db_schema=schema), url),
                          MasterKeyring.from_base64([key]))
    pool = ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True)
    worker = ProjectionWorker(ledger, pool, schema, all_projections(), batch_size=3)
    print("ready", flush=True)
    worker.catch_up()
    print("done", flush=True)
    """
)


def fill(ledger: MemoryLedger, n: int) -> None:
    for i in range(n):
        memory = ledger.create_memory(
            f"user{i % 7}",
            scope=Scope.global_(),
            memory_key=f"k{i}",
            content=f"fact {i}",
            category="preference",
        ).memory
        if i % 3 == 0:
            ledger.update_memory(
                memory.user_id, memory.memory_id, expected_revision=1, content=f"fact {i} corrected"
            )
        if i % 5 == 0:
            ledger.forget_memory(memory.user_id, memory.memory_id)


@pytest.mark.parametrize("delay", [0.05, 0.15, 0.3])
def test_a_killed_worker_resumes_to_the_same_tables(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    database_url: str,
    pg_schema: str,
    master_key: str,
    delay: float,
) -> None:
    fill(ledger, 120)
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, database_url, pg_schema, master_key],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    with process, process.stdout as output:  # type: ignore[union-attr]
        assert output.readline().strip() == "ready"
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
    heads = ledger.recorder.heads()
    killed_at = worker.positions()
    names = {p.name for p in all_projections()}
    assert any(
        killed_at.get((name, partition), 0) < head
        for name in names
        for partition, head in heads.items()
    ), "the kill must land mid-run"

    worker.catch_up()  # the restarted worker
    positions = worker.positions()
    assert all(
        positions.get((name, partition), 0) == head
        for name in names
        for partition, head in heads.items()
    )
    report = rebuild(ledger, worker.pool, pg_schema, all_projections())
    assert report.identical, report.differences
