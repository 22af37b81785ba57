"""The Python SDK against a live server: the app under uvicorn on a free loopback port, over
this test's PostgreSQL schema, its projection worker in-process (tests/conftest.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from api.tokens import mint_token
from memledger_client import MemLedger
from projections.reads import Reads
from projections.worker import ProjectionWorker
from tests.conftest import JWT_SECRET
from tests.e2e.console_harness import serving

Token = Callable[..., str]
"""token(user="alice", **claims): a bearer token the test servers accept."""


@pytest.fixture
def token() -> Token:
    def make(user: str = "alice", **claims: Any) -> str:
        return mint_token(JWT_SECRET, user, **claims)

    return make


@pytest.fixture
def base_url(services: Services) -> Iterator[str]:
    """The whole app, served on a free port, with its projection worker running."""
    with serving(create_app(services)) as url:
        yield url


@pytest.fixture
def alice(base_url: str, token: Token) -> Iterator[MemLedger]:
    """A client with alice's user token."""
    with MemLedger(base_url, token("alice")) as client:
        yield client


class Requests:
    """The requests a client sent, each as (method, path, headers), through an event hook."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, httpx2.Headers]] = []

    def __call__(self, request: httpx2.Request) -> None:
        self.sent.append((request.method, request.url.path, request.headers))

    def client(self, base_url: str) -> httpx2.Client:
        return httpx2.Client(base_url=base_url, event_hooks={"request": [self]})

    def async_client(self, base_url: str) -> httpx2.AsyncClient:
        async def hook(request: httpx2.Request) -> None:
            self(request)

        return httpx2.AsyncClient(base_url=base_url, event_hooks={"request": [hook]})


@pytest.fixture
def requests() -> Requests:
    return Requests()


class Stalled:
    """Two servers over one ledger whose projection worker is not running yet: a read that
    must show a write waits for it, then answers 503 with Retry-After (a lagging projection,
    for real). `start_worker` lets the projections catch up (the `start_on_retry` fixture:
    when the SDK logs its first retry)."""

    def __init__(self, worker: ProjectionWorker, urls: tuple[str, str]) -> None:
        self.worker = worker
        self.writer, self.reader = urls
        self.started = False

    def start_worker(self) -> None:
        if not self.started:
            self.started = True
            self.worker.start()


@pytest.fixture
def stalled(
    ledger: Any, make_worker: Callable[..., ProjectionWorker], pg_schema: str
) -> Iterator[Stalled]:
    worker = make_worker()

    def services() -> Services:
        # Each its own Services: like two processes, neither knows the other's writes.
        return Services(
            ledger=ledger,
            reads=Reads(worker.pool, pg_schema, worker.ledger.partition),
            metrics=Metrics(),
            jwt_secret=JWT_SECRET,
            worker=worker,
            read_timeout=1.0,
            retry_after=1,
        )

    with serving(create_app(services())) as writer, serving(create_app(services())) as reader:
        yield Stalled(worker, (writer, reader))


@pytest.fixture
def start_on_retry(stalled: Stalled) -> Iterator[None]:
    """Start the stalled servers' worker when the SDK logs its first retry."""

    class OnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            stalled.start_worker()

    handler = OnRetry(logging.WARNING)
    logger = logging.getLogger("memledger_client")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def retry_log() -> Iterator[list[logging.LogRecord]]:
    """The SDK's retry warnings (logger `memledger_client`)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("memledger_client")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
