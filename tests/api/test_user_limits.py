"""Per-user concurrency (api/limits.py) over HTTP against real PostgreSQL: a user past their
limit gets 429 with Retry-After at once, and another user is served as before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.limits import UserLimits
from api.metrics import Metrics
from api.services import Services
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.vectors.queue import FairQueue
from retrieval.vectors.service import EmbeddingService
from tests.retrieval.test_query_bounds import Recording

pytestmark = pytest.mark.integration
SECRET = "test-secret-of-at-least-32-bytes-long!"


class Limited:
    """An app whose embedder holds any query naming Recording.BLOCK until released."""

    def __init__(self, client: TestClient, embedder: Recording, services: Services) -> None:
        self.client = client
        self.embedder = embedder
        self.services = services

    def search(self, user: str, query: str) -> httpx2.Response:
        token = mint_token(SECRET, user, workspace="learning")
        return self.client.post(
            "/tools/search_core_memories",
            json={"query": query},
            headers={"Authorization": f"Bearer {token}"},
        )

    def list(self, user: str) -> httpx2.Response:
        token = mint_token(SECRET, user)
        return self.client.get("/me/core-memories", headers={"Authorization": f"Bearer {token}"})

    def hold_a_search(self, user: str) -> tuple[threading.Thread, list[httpx2.Response]]:
        """A search of `user`'s that stays in flight until `release()`."""
        answered: list[httpx2.Response] = []
        thread = threading.Thread(
            target=lambda: answered.append(self.search(user, f"study {Recording.BLOCK}"))
        )
        thread.start()
        assert self.embedder.blocked.wait(timeout=30), "the held search never reached the model"
        return thread, answered

    def release(self, thread: threading.Thread) -> None:
        self.embedder.gate.set()
        thread.join(timeout=30)


@pytest.fixture
def limited(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> Iterator[Callable[..., Limited]]:
    made: list[Limited] = []

    def make(**limits: Any) -> Limited:
        embedder = Recording(f"test/limits-{id(ledger)}-{len(made)}")
        # two query threads: the held search occupies one, other users' searches take the other
        embeddings = EmbeddingService(embedder, query_queue=FairQueue(2))
        worker = make_worker(all_projections(embeddings))
        for user in ("alice", "bob"):
            ledger.create_memory(
                user,
                scope=Scope.global_(),
                memory_key="study_time",
                content="weekday study time is one hour",
                category="constraint",
            )
        worker.catch_up()
        services = Services(
            ledger=ledger,
            reads=Reads(worker.pool, worker.schema, worker.ledger.partition),
            metrics=Metrics(),
            jwt_secret=SECRET,
            worker=worker,
            embeddings=embeddings,
            limits=UserLimits(**limits),
        )
        client = TestClient(create_app(services)).__enter__()
        made.append(Limited(client, embedder, services))
        return made[-1]

    yield make
    for app in made:
        app.embedder.gate.set()
        app.client.__exit__(None, None, None)


def refused(response: httpx2.Response) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "1"
    body = response.json()
    assert isinstance(body["detail"], str) and "per user" in body["detail"]


def test_a_second_concurrent_search_of_a_user_is_429_and_another_user_searches(
    limited: Callable[..., Limited],
) -> None:
    app = limited(requests=8, searches=1)
    held, answered = app.hold_a_search("alice")

    refused(app.search("alice", "weekday study"))
    other = app.search("bob", "weekday study")
    assert other.status_code == 200 and [i["memory_key"] for i in other.json()["items"]] == [
        "study_time"
    ]
    assert app.list("alice").status_code == 200  # her other requests are within their limit

    app.release(held)
    assert answered and answered[0].status_code == 200
    assert app.search("alice", "weekday study").status_code == 200  # the slot was given back
    assert app.services.limits.in_flight("alice", "search") == 0
    metrics = app.client.get("/metrics").text
    assert 'memledger_user_limited_total{kind="search"} 1.0' in metrics


def test_every_authenticated_request_counts_toward_the_user_limit(
    limited: Callable[..., Limited],
) -> None:
    app = limited(requests=1, searches=1)
    held, answered = app.hold_a_search("alice")

    refused(app.list("alice"))  # any route: the request slot is taken by her search
    assert app.list("bob").status_code == 200
    assert app.client.get("/healthz").status_code == 200  # unauthenticated: not per user

    app.release(held)
    assert answered and answered[0].status_code == 200
    assert app.list("alice").status_code == 200
    assert app.services.limits.in_flight("alice") == 0


def test_a_refused_token_takes_no_slot(limited: Callable[..., Limited]) -> None:
    app = limited(requests=1)
    bad = {"Authorization": "Bearer not-a-token"}
    assert app.client.get("/me/core-memories", headers=bad).status_code == 401
    assert app.list("alice").status_code == 200
