"""Faults: a crash at any point of forgetting leaves all or nothing; dropped connections recover."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from psycopg import sql

from api.bootstrap import postgres_env
from api.settings import Settings
from domain.errors import LedgerUnavailable
from domain.ledger.keyring import MasterKeyring
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.pipeline import Statement
from domain.ledger.persistence.recorder import LedgerRecorder, Transaction
from domain.model.events import REDACTED
from domain.model.values import Scope

FORGETTER = textwrap.dedent(
    """
    import json, sys
    from api.bootstrap import postgres_env
    from api.settings import Settings
    from domain.ledger.keyring import MasterKeyring
    from domain.ledger.ledger import MemoryLedger
    url, schema, key, ids = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    settings = Settings(database_url=url, db_schema=schema)
    ledger = MemoryLedger(postgres_env(settings, url), MasterKeyring.from_base64([key]))
    from uuid import UUID
    print("ready", flush=True)
    for n, memory_id in enumerate(ids, 1):
        ledger.forget_memory("alice", UUID(memory_id))
        print(n, flush=True)
    print("done", flush=True)
    """
)


def state(database_url: str, schema: str, memory_id: Any) -> tuple[bool, bool, bool]:
    """(tombstone appended, data key present, key claim present) for one memory."""
    s = sql.Identifier(schema)
    with psycopg.connect(database_url) as conn:
        tomb = conn.execute(
            sql.SQL(
                "SELECT 1 FROM {}.memledger_events WHERE originator_id = %s AND topic = %s"
            ).format(s),
            (memory_id, "memledger:Memory.Forgotten"),
        ).fetchone()
        key = conn.execute(
            sql.SQL("SELECT 1 FROM {}.memledger_data_keys WHERE key_id = %s").format(s),
            (memory_id,),
        ).fetchone()
        claim = conn.execute(
            sql.SQL("SELECT 1 FROM {}.memledger_key_claims WHERE memory_id = %s").format(s),
            (memory_id,),
        ).fetchone()
    return tomb is not None, key is not None, claim is not None


def many_memories(ledger: MemoryLedger, n: int) -> list[Any]:
    return [
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        ).memory.memory_id
        for i in range(n)
    ]


@pytest.mark.parametrize("kill_after", [1, 17, 60])
def test_killing_a_process_mid_forget_leaves_each_memory_whole_or_shredded(
    ledger: MemoryLedger,
    database_url: str,
    pg_schema: str,
    master_key: str,
    kill_after: int,
) -> None:
    ids = many_memories(ledger, 150)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FORGETTER,
            database_url,
            pg_schema,
            master_key,
            json.dumps([str(i) for i in ids]),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    with process, process.stdout as output:  # type: ignore[union-attr]
        assert output.readline().strip() == "ready"
        while int(output.readline()) < kill_after:  # kill right after forget number kill_after
            pass
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the kill must land mid-run"

    states = [state(database_url, pg_schema, i) for i in ids]
    assert all(s in {(True, False, False), (False, True, True)} for s in states), states
    survivors = [i for i, s in zip(ids, states, strict=True) if not s[0]]
    for memory_id in survivors:  # the restarted service finishes the job
        ledger.forget_memory("alice", memory_id)
    assert all(state(database_url, pg_schema, i) == (True, False, False) for i in ids)


def test_a_failure_inside_the_forget_transaction_changes_nothing(
    ledger: MemoryLedger,
    database_url: str,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (memory_id,) = many_memories(ledger, 1)

    original = LedgerRecorder._transaction

    def crash(self: LedgerRecorder, *args: Any, **kwargs: Any) -> Transaction:
        transaction = original(self, *args, **kwargs)  # keys deleted, tombstone inserted...
        # ... then the database fails it before it commits:
        transaction.add(Statement(b"SELECT 1 / 0"))
        return transaction

    monkeypatch.setattr(LedgerRecorder, "_transaction", crash)
    with pytest.raises(LedgerUnavailable):
        ledger.forget_memory("alice", memory_id)
    assert state(database_url, pg_schema, memory_id) == (False, True, True)
    monkeypatch.undo()
    assert ledger.get_memory("alice", memory_id).content == "fact 0"
    ledger.forget_memory("alice", memory_id)
    assert state(database_url, pg_schema, memory_id) == (True, False, False)


def test_restoring_an_old_key_backup_does_not_bring_content_back(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    (memory_id,) = many_memories(ledger, 1)
    keys = sql.SQL("{}.memledger_data_keys").format(sql.Identifier(pg_schema))
    with psycopg.connect(database_url) as conn:
        backup = conn.execute(sql.SQL("SELECT * FROM {}").format(keys)).fetchall()
    ledger.forget_memory("alice", memory_id)
    with psycopg.connect(database_url) as conn:  # an operator restores yesterday's key table
        conn.execute(sql.SQL("DELETE FROM {}").format(keys))
        for row in backup:
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES ({})").format(
                    keys, sql.SQL(", ").join([sql.Placeholder()] * len(row))
                ),
                row,
            )

    restarted = make_ledger()
    assert restarted.complete_shredding() == 1
    assert restarted.complete_shredding() == 0
    created = next(iter(restarted.events.get(memory_id)))
    assert created.content == REDACTED


def test_commands_survive_the_database_dropping_every_connection(
    make_ledger: Callable[..., MemoryLedger], database_url: str, pg_schema: str
) -> None:
    # The pool checks each idle connection with a growing back-off, so keep it small here.
    ledger = make_ledger(pool_size=2)
    (memory_id,) = many_memories(ledger, 1)
    pool = ledger.factory.datastore.pool  # type: ignore[attr-defined]
    pool.wait()
    with pool.connection() as one, pool.connection() as two:  # the pool's only connections
        pids = [one.info.backend_pid, two.info.backend_pid]
    with psycopg.connect(database_url, autocommit=True) as conn:
        # Only this ledger's connections: other test runs sharing the server keep theirs.
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM unnest(%s::int[]) AS pid", (pids,)
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    updated = ledger.update_memory("alice", memory_id, expected_revision=1, content="fact one")
    assert updated.memory.revision == 2


def test_a_save_blocked_on_its_partitions_head_gives_up_and_its_retry_writes_once(
    ledger: MemoryLedger,
    database_url: str,
    pg_schema: str,
    master_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The lock timeout is set for every ledger session (domain/ledger/persistence/factory.py): a
    # save waiting on its partition's head row (which each save locks to order its commits)
    # must give up on its own and be retried, not hang or half-write.
    settings = Settings(database_url=database_url, db_schema=pg_schema, lock_timeout=1)
    impatient = MemoryLedger(
        postgres_env(settings, database_url), MasterKeyring.from_base64([master_key])
    )
    attempts: list[int] = []
    retried = threading.Event()
    original = LedgerRecorder._transaction

    def counted(self: LedgerRecorder, *args: Any, **kwargs: Any) -> Transaction:
        attempts.append(1)
        if len(attempts) == 2:
            retried.set()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LedgerRecorder, "_transaction", counted)
    heads = sql.SQL("{}.memledger_ledger_heads").format(sql.Identifier(pg_schema))
    try:
        with ThreadPoolExecutor(1) as pool, psycopg.connect(database_url) as holder:
            held = holder.execute(
                sql.SQL("SELECT partition FROM {} WHERE partition = %s FOR UPDATE").format(heads),
                (ledger.partition("alice"),),
            ).fetchall()
            assert len(held) == 1  # alice's partition has its head row, now locked
            saved = pool.submit(
                impatient.create_memory,
                "alice",
                scope=Scope.global_(),
                memory_key="k",
                content="fact",
                category="fact",
            )
            assert retried.wait(timeout=60), "the blocked save never gave up on the lock"
            holder.rollback()  # releases the lock: the retry goes through
            outcome = saved.result(timeout=60)
    finally:
        impatient.close()
    assert outcome.status == "created"
    assert ledger.get_memory("alice", outcome.memory.memory_id).content == "fact"
    s = sql.Identifier(pg_schema)
    with psycopg.connect(database_url) as conn:  # the given-up attempt left nothing behind
        counts = conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM {}.memledger_events),"
                " (SELECT count(*) FROM {}.memledger_data_keys WHERE kind = 'memory'),"
                " (SELECT count(*) FROM {}.memledger_key_claims)"
            ).format(s, s, s)
        ).fetchone()
    assert counts == (1, 1, 1)


def test_a_ledger_starting_beside_saves_in_flight_neither_waits_nor_deadlocks(
    ledger: MemoryLedger, database_url: str, pg_schema: str, master_key: str
) -> None:
    # A CLI command (erase-user) starts its own ledger while the server saves: on a schema that
    # has every table, starting takes no lock, so it cannot queue behind (or deadlock with) a
    # save holding the side tables and the events table.
    ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="fact", category="fact"
    )
    tables = [
        sql.SQL("{}.{}").format(sql.Identifier(pg_schema), sql.Identifier(name))
        for name in ("memledger_data_keys", "memledger_candidate_fingerprints", "memledger_events")
    ]
    with psycopg.connect(database_url) as saving:  # as a save does, mid-transaction
        for table in tables:
            saving.execute(sql.SQL("LOCK TABLE {} IN ROW EXCLUSIVE MODE").format(table))
        saving.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(tables[-1]))
        settings = Settings(database_url=database_url, db_schema=pg_schema, lock_timeout=1)
        with ThreadPoolExecutor(1) as pool:  # with the lock timeout it would raise, not hang
            started = pool.submit(
                MemoryLedger,
                postgres_env(settings, database_url),
                MasterKeyring.from_base64([master_key]),
            )
            second = started.result(timeout=30)
        saving.rollback()
    try:
        assert second.get_memory("alice", ledger.memory_ids("alice")[0]).content == "fact"
    finally:
        second.close()
