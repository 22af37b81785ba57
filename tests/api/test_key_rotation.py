"""Master key rotation that running processes follow without 5xx (issue 13, item 6): `keys
rotate` refuses while a connected process lacks the new key, the procedure of
docs/operations.md works with a server answering throughout, `keys status` says where it
stands, and a data key under a master key the server does not hold is a 503, not a 500."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql
from psycopg_pool import ConnectionPool
from typer.testing import CliRunner

from api.app import create_app
from api.cli import app
from api.cli.common import EXIT_REFUSED
from api.metrics import Metrics
from api.services import Services
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.ledger.rotation import RotationRefused
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker, ensure_tables
from tests.api.test_cli_errors import one_line_error

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"  # as in tests/conftest.py


def key_id(key: str) -> str:
    return MasterKeyring.from_base64([key]).active_id


def wrapped_under(database_url: str, schema: str) -> dict[str, int]:
    """Data keys per master key id, read from the key table."""
    query = sql.SQL(
        "SELECT master_key_id, count(*) FROM {}.memledger_data_keys GROUP BY master_key_id"
    ).format(sql.Identifier(schema))
    with psycopg.connect(database_url) as conn:
        return {row[0]: row[1] for row in conn.execute(query).fetchall()}


def keys_cli(env: dict[str, Any], keys: list[str], *args: str) -> Any:
    master = ",".join(keys)
    return CliRunner().invoke(app, ["keys", *args], env={**env, "MEMLEDGER_MASTER_KEY": master})


def wait_gone(database_url: str, pids: set[int]) -> None:
    """Until the server has ended these sessions (a backend exits after its client left)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(200):
            query = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
            row = conn.execute(query, (list(pids),)).fetchone()
            if row is not None and row[0] == 0:
                return
            threading.Event().wait(0.05)
    raise AssertionError(f"sessions {pids} are still connected")


def remember(ledger: MemoryLedger, n: int) -> None:
    for i in range(n):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        )


def test_rotate_refuses_while_a_connected_process_lacks_the_new_key(
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
    env: dict[str, Any],
    database_url: str,
    pg_schema: str,
) -> None:
    old_process = make_ledger(keys=[master_key])
    remember(old_process, 3)
    pool = old_process.factory.datastore.pool  # type: ignore[attr-defined]
    pool.wait()  # its connections are open, as a server's are
    with pool.connection() as conn:
        pid = conn.info.backend_pid
    pids = {s.pid for s in old_process.rotation.status().sessions}
    before = wrapped_under(database_url, pg_schema)
    old, new = key_id(master_key), generate_master_key()

    refused = keys_cli(env, [new, master_key], "rotate")

    line = one_line_error(refused, EXIT_REFUSED)
    assert f"pid {pid} from " in line and f"holding {old[:8]}" in line
    assert key_id(new) in line and "MEMLEDGER_MASTER_KEY" in line
    assert wrapped_under(database_url, pg_schema) == before == {old: 3 + 1 + 1}

    old_process.close()  # gone: nothing connected lacks the new key any more
    wait_gone(database_url, pids)
    done = keys_cli(env, [new, master_key], "rotate")
    assert done.exit_code == 0, done.output
    assert wrapped_under(database_url, pg_schema) == {key_id(new): 5}


def test_a_process_connecting_mid_rotation_without_the_new_key_stops_it(
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
    database_url: str,
    pg_schema: str,
) -> None:
    writer = make_ledger(keys=[master_key])
    remember(writer, 3)
    pids = {s.pid for s in writer.rotation.status().sessions}
    writer.close()
    wait_gone(database_url, pids)
    new = generate_master_key()
    rotating = make_ledger(keys=[new, master_key])
    late: list[MemoryLedger] = []

    def start_an_old_process(_: int) -> None:
        if not late:
            late.append(make_ledger(keys=[master_key]))

    with pytest.raises(RotationRefused) as refused:
        rotating.rotation.rotate(batch_size=2, progress=start_an_old_process)

    assert refused.value.rewrapped == 2 and refused.value.sessions
    assert "stopped after re-wrapping 2 data keys" in str(refused.value)
    assert wrapped_under(database_url, pg_schema) == {key_id(new): 2, key_id(master_key): 3}


def test_rotate_refuses_data_keys_under_a_master_key_it_does_not_hold(
    make_ledger: Callable[..., MemoryLedger], master_key: str, env: dict[str, Any]
) -> None:
    ledger = make_ledger(keys=[master_key])
    remember(ledger, 1)
    ledger.close()
    stranger = generate_master_key()
    refused = keys_cli(env, [generate_master_key(), stranger], "rotate")
    line = one_line_error(refused, EXIT_REFUSED)
    assert f"3 under {key_id(master_key)}" in line


def test_status_counts_data_keys_per_master_key_and_lists_the_sessions(
    make_ledger: Callable[..., MemoryLedger], master_key: str, env: dict[str, Any]
) -> None:
    old_process = make_ledger(keys=[master_key])
    remember(old_process, 2)
    old_process.factory.datastore.pool.wait()  # type: ignore[attr-defined]
    old, new = key_id(master_key), generate_master_key()

    result = keys_cli(env, [new, master_key], "status")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["master", "key", "here", "data", "keys"]
    assert lines[1].split() == [key_id(new), "active", "0"]
    assert lines[2].split() == [old, "held", "4"]
    sessions = [line for line in lines if line.startswith("  pid ")]
    assert any(line.endswith(f"holding {old[:8]}") for line in sessions)
    assert any(line.endswith(f"holding {key_id(new)[:8]},{old[:8]}") for line in sessions)
    assert "restart their processes with" in result.stdout
    assert lines[-1] == (
        f"oldest master key still in use: {old} (4 data keys); run `memledger keys rotate --retire`"
    )


def test_a_data_key_under_a_master_key_the_server_lacks_is_503(
    client: TestClient,
    auth: Auth,
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
) -> None:
    # Another process wrote and rotated before this server ever needed the ledger's own key.
    writer = make_ledger(keys=[master_key])
    remember(writer, 1)
    writer.close()
    make_ledger(keys=[generate_master_key(), master_key]).keys.rotate()

    body = {"memory_key": "k", "content": "tea", "category": "fact", "scope_type": "global"}
    response = client.post(BASE, json=body, headers=auth("bob"))

    assert response.status_code == 503, response.text
    assert response.json()["reason"] == "master_key_missing"
    assert response.headers["Retry-After"]


@contextmanager
def serving(ledger: MemoryLedger, database_url: str, schema: str) -> Iterator[TestClient]:
    """The API over `ledger`, its projection worker running, as `memledger serve` runs it."""
    pool: ConnectionPool[Any] = ConnectionPool(
        database_url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
    )
    ensure_tables(pool, schema, all_projections())
    worker = ProjectionWorker(ledger, pool, schema, all_projections())
    worker.start()
    services = Services(
        ledger=ledger,
        reads=Reads(pool, schema, ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
    )
    try:
        with TestClient(create_app(services), raise_server_exceptions=False) as client:
            yield client
    finally:
        worker.stop()
        pool.close()


class Traffic:
    """Creates and reads memories over HTTP in a thread, recording every status."""

    def __init__(self, client: TestClient, auth: Auth, prefix: str) -> None:
        self.client, self.headers, self.prefix = client, auth("alice"), prefix
        self.statuses: list[int] = []
        self.created: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def until(self, done: Callable[[], bool], timeout: float = 60.0) -> None:
        """Wait until `done()` (the thread still running), at most `timeout` seconds."""
        for _ in range(int(timeout / 0.05)):
            if done():
                return
            assert self._thread.is_alive(), "the traffic thread died"
            threading.Event().wait(0.05)
        raise AssertionError(f"traffic stalled: {len(self.statuses)} answers")

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            body = {
                "memory_key": f"{self.prefix}{i}",
                "content": f"{self.prefix} fact {i}",
                "category": "fact",
                "scope_type": "global",
            }
            created = self.client.post(BASE, json=body, headers=self.headers)
            self.statuses.append(created.status_code)
            if created.status_code == 201:
                memory_id = created.json()["memory_id"]
                self.created.append(memory_id)
                got = self.client.get(f"{BASE}/{memory_id}", headers=self.headers)
                self.statuses.append(got.status_code)
            self.statuses.append(self.client.get(BASE, headers=self.headers).status_code)


def test_the_documented_procedure_runs_beside_a_serving_api_without_5xx(
    make_ledger: Callable[..., MemoryLedger],
    auth: Auth,
    master_key: str,
    env: dict[str, Any],
    database_url: str,
    pg_schema: str,
) -> None:
    old, new = master_key, generate_master_key()
    created: list[str] = []

    # No key cache: every request reads its data keys from the key table as rotated so far.
    def server(keys: list[str]) -> MemoryLedger:
        return make_ledger(keys=keys, key_cache_ttl=0.0)

    # (1) every process holds the new key after the current one; (2) rotate, new key first.
    with serving(server([old, new]), database_url, pg_schema) as client:
        with Traffic(client, auth, "a") as traffic:
            traffic.until(lambda: len(traffic.created) >= 20)
            rotated = keys_cli(env, [new, old], "rotate", "--batch", "2")
            served = len(traffic.statuses)
            traffic.until(lambda: len(traffic.statuses) >= served + 10)
        assert rotated.exit_code == 0, rotated.output
        assert [s for s in traffic.statuses if s >= 500] == []
        created += traffic.created
    # (3) every process restarted with the new key first; (4) rotate again (keys made meanwhile).
    with serving(server([new, old]), database_url, pg_schema) as client:
        with Traffic(client, auth, "b") as traffic:
            traffic.until(lambda: len(traffic.created) >= 5)
            again = keys_cli(env, [new, old], "rotate")
        assert again.exit_code == 0, again.output
        assert [s for s in traffic.statuses if s >= 500] == []
        created += traffic.created

    assert wrapped_under(database_url, pg_schema).keys() == {key_id(new)}
    status = keys_cli(env, [new, old], "status")
    assert status.stdout.splitlines()[-1] == (
        f"every data key is under the active master key {key_id(new)}"
    )
    # (5) the old key dropped: a process with the new key alone reads every memory.
    only_new = make_ledger(keys=[new])
    contents = [only_new.get_memory("alice", m).content for m in map(UUID, created)]
    assert len(contents) == len(created) >= 25 and all(" fact " in c for c in contents)
