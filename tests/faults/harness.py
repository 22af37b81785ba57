"""The fault suite's tools: a `memledger serve` process to kill and restart, client load that
records every call, and the checks every scenario makes (no 500, answered within the bound,
no acknowledged write lost, projections equal to a fresh rebuild)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from api.bootstrap import postgres_env
from api.settings import Settings
from api.tokens import mint_token
from domain.ledger.keyring import MasterKeyring
from domain.ledger.ledger import MemoryLedger
from projections.rebuild import rebuild
from projections.registry import main_projections
from projections.tracking import Tables, read_positions
from tests.e2e.test_server_e2e import SECRET, serve_command, wait_until_ready

__all__ = ["BOUND", "SLACK", "Call", "FaultServer", "Load", "check_calls", "projections_rebuilt"]

BOUND = 3.0
"""MEMLEDGER_REQUEST_DEADLINE of the servers under test (seconds)."""
SLACK = float(os.environ.get("MEMLEDGER_FAULT_SLACK", "2.0"))
"""What a busy machine may add to the bound between the server and the client (seconds)."""


@dataclass
class FaultServer:
    """A `memledger serve` process (or `memledger projections run`, `command`) to kill."""

    env: dict[str, str]
    port: int
    log: Path
    command: list[str] = field(default_factory=lambda: ["serve"])
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, ready: bool = True) -> None:
        """Start it; a server is waited for until /readyz answers 200 (60 s at most)."""
        args = [*serve_command()[:-1], *self.command]
        if self.command[0] == "serve":
            args += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                args, env=self.env, cwd=self.log.parent, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        if ready:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until /readyz answers 200 (as the end-to-end tests wait for their server)."""
        wait_until_ready(self)  # type: ignore[arg-type]  # the same process, url and output

    def kill(self) -> None:
        """kill -9."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (a clean exit), kill -9 after 15 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    def errors(self) -> list[str]:
        """The log lines of the errors the server logged (a 500's traceback among them)."""
        if not self.log.exists():
            return []
        lines = self.log.read_text(errors="replace").splitlines()
        return [line for line in lines if '"level": "ERROR"' in line]

    def client(self, user: str, **claims: Any) -> httpx2.Client:
        """A client with `user`'s token (and these claims: `workspace=` for the tools)."""
        return httpx2.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {mint_token(SECRET, user, **claims)}"},
            timeout=BOUND + 30,  # a hang shows as a slow call, not as a client timeout
            trust_env=False,
        )


def server_env(database_url: str, schema: str, master_key: str, data: Path) -> dict[str, str]:
    """The environment of a server (or projections process) under test."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")} | {
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_JWT_SECRET": SECRET,
        "MEMLEDGER_DATA_DIR": str(data),
        "MEMLEDGER_EMBEDDER": "off",
        "MEMLEDGER_REQUEST_DEADLINE": str(BOUND),
        "MEMLEDGER_STATEMENT_TIMEOUT": "2",
        "MEMLEDGER_RETRY_AFTER": "1",
        "MEMLEDGER_CONNECT_TIMEOUT": "2",
    }


@dataclass(frozen=True)
class Call:
    """One HTTP call: status None when no answer came (the server process was down)."""

    method: str
    path: str
    status: int | None
    seconds: float
    retry_after: str | None


def timed(client: httpx2.Client, method: str, path: str, **kwargs: Any) -> tuple[Call, Any]:
    """The call made, and its JSON body (None without one)."""
    started = time.monotonic()
    try:
        response = client.request(method, path, **kwargs)
    except httpx2.TransportError:
        return Call(method, path, None, time.monotonic() - started, None), None
    call = Call(
        method,
        path,
        response.status_code,
        time.monotonic() - started,
        response.headers.get("retry-after"),
    )
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    return call, body


def create(client: httpx2.Client) -> tuple[Call, Any]:
    """POST a new global memory with a key of its own."""
    key = f"k_{uuid.uuid4().hex[:12]}"
    body = {"memory_key": key, "content": f"fact {key}", "category": "fact"}
    return timed(client, "POST", "/me/core-memories", json=body | {"scope_type": "global"})


class Load:
    """`writers` threads creating memories and reading each back, `readers` threads listing,
    until stop(). Every call is kept; acknowledged writes (200/201) by user and memory id."""

    def __init__(self, server: FaultServer, *, writers: int = 3, readers: int = 1) -> None:
        self.server = server
        self.calls: list[Call] = []
        self.acknowledged: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._write, args=(f"writer{i}",), daemon=True)
            for i in range(writers)
        ] + [
            threading.Thread(target=self._read, args=(f"writer{i}",), daemon=True)
            for i in range(readers)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=BOUND + 35)

    def _keep(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)
        if call.status is None or call.status == 503:
            time.sleep(0.05)  # no busy loop while the server or the database is down

    def _write(self, user: str) -> None:
        with self.server.client(user) as client:
            while not self._stop.is_set():
                call, body = create(client)
                self._keep(call)
                if call.status in (200, 201):
                    with self._lock:
                        self.acknowledged.append((user, body["memory_id"]))
                    self._keep(timed(client, "GET", f"/me/core-memories/{body['memory_id']}")[0])

    def _read(self, user: str) -> None:
        with self.server.client(user) as client:
            while not self._stop.is_set():
                self._keep(timed(client, "GET", "/me/core-memories", params={"limit": 5})[0])
                self._stop.wait(0.05)


def check_calls(
    calls: list[Call], *, server_down: bool = False, server: FaultServer | None = None
) -> None:
    """No 500 (no status outside the contract), every 503 with Retry-After, every answer
    within the bound (+ slack). Unanswered calls only when the server process was down.
    `server`: whose logged errors a failure shows (a 500's traceback)."""
    assert calls, "the load made no call"
    unexpected = [c for c in calls if c.status is not None and c.status not in (200, 201, 503)]
    assert not unexpected, (unexpected[:5], server.errors()[-3:] if server else None)
    assert all(c.retry_after for c in calls if c.status == 503)
    slow = [c for c in calls if c.status is not None and c.seconds > BOUND + SLACK]
    assert not slow, slow[:5]
    if not server_down:
        assert all(c.status is not None for c in calls), [c for c in calls if c.status is None][:5]


def until(what: Callable[[], bool], timeout: float, step: float = 0.1) -> float:
    """Seconds until `what()` held (AssertionError after `timeout`)."""
    started = time.monotonic()
    while not what():
        elapsed = time.monotonic() - started
        assert elapsed < timeout, f"not within {timeout}s"
        time.sleep(step)
    return time.monotonic() - started


def until_answered(client: httpx2.Client, path: str, params: dict[str, Any]) -> Any:
    """The body of a GET answered 200, retried on 503 (projections catching up) for 30 s."""
    deadline = time.monotonic() + 30
    while True:
        call, body = timed(client, "GET", path, params=params)
        if call.status != 503 or time.monotonic() > deadline:
            assert call.status == 200, (call, body, _lags(client))
            return body
        time.sleep(0.2)


def stacks(server: FaultServer) -> str:
    """Every thread's stack of a running server (`kill -USR1`, api/cli/common.py), as its log
    ends: where its workers and requests wait."""
    if server.process is None or server.process.poll() is not None:
        return server.output()
    before = server.log.stat().st_size
    server.process.send_signal(signal.SIGUSR1)
    time.sleep(1.0)
    with server.log.open("rb") as log:
        log.seek(before)
        return log.read().decode(errors="replace")


def _lags(client: httpx2.Client) -> list[list[str]]:
    """The server's projection gauges, read twice a second apart: a worker that is behind and
    catching up, or one that stands still (what a 503 that never ends needs to say)."""
    readings = []
    for pause in (0.0, 1.0):
        time.sleep(pause)
        lines = client.get("/metrics").text.splitlines()
        readings.append([line for line in lines if line.startswith("memledger_projection_")])
    return readings


def acknowledged_writes_kept(server: FaultServer, acknowledged: list[tuple[str, str]]) -> None:
    """Every acknowledged memory is there, by id and in its owner's list."""
    assert acknowledged, "no write was acknowledged"
    users = sorted({user for user, _ in acknowledged})
    listed: set[str] = set()
    for user in users:
        with server.client(user) as client:
            cursor = None
            while True:
                params: dict[str, Any] = {"limit": 200} | ({"cursor": cursor} if cursor else {})
                try:
                    page = until_answered(client, "/me/core-memories", params)
                except AssertionError as failed:
                    raise AssertionError(f"{failed}\n{stacks(server)}") from None
                listed |= {item["memory_id"] for item in page["items"]}
                cursor = page["next_cursor"]
                if not cursor:
                    break
    missing = [memory_id for _, memory_id in acknowledged if memory_id not in listed]
    assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:5]}"


def at_heads(database_url: str, schema: str) -> bool:
    """Every main projection at the head of every partition (the heads table read)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        heads = conn.execute(
            sql.SQL("SELECT partition, position FROM {}").format(
                sql.Identifier(schema, "memledger_ledger_heads")
            )
        ).fetchall()
        positions = read_positions(conn, Tables(schema))
    return all(
        positions.get((p.name, partition), 0) == head
        for p in main_projections()
        for partition, head in heads
    )


def projections_rebuilt(database_url: str, schema: str, master_key: str) -> None:
    """The live projections equal a fresh rebuild from the ledger (server stopped)."""
    settings = Settings(database_url=database_url, db_schema=schema)
    ledger = MemoryLedger(
        postgres_env(settings, database_url), MasterKeyring.from_base64([master_key])
    )
    pool: ConnectionPool[Any] = ConnectionPool(
        database_url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
    )
    try:
        report = rebuild(ledger, pool, schema, main_projections(), processes=1)
        assert report.identical, report.differences
    finally:
        pool.close()
        ledger.close()
