"""The reranker stage through `POST /tools/search_core_memories` (hybrid search, the bundled
e5), against a fake `/rerank` server on 127.0.0.1 (tests/rerank_server.py): its order and
relevance when it answers; the fused order, a counted outcome and a degraded /readyz when it
is slow, fails or answers nonsense; nothing at all when it is off (the default)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.bootstrap import build_reranker
from api.deps import Services
from api.metrics import Metrics
from api.settings import Settings
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.cache import QueryCache
from retrieval.rerank import Reranker
from retrieval.rerankers import HttpScorer
from retrieval.search import MemorySearch
from retrieval.vectors.service import EmbeddingService
from tests.conftest import JWT_SECRET
from tests.rerank_server import FakeReranker, fake_reranker

Auth = Callable[..., dict[str, str]]
CONTENTS = (
    "I write Python in Neovim",
    "Python 3.12 is my default interpreter",
    "My Python code is always typed",
)


@pytest.fixture
def fake() -> Iterator[FakeReranker]:
    with fake_reranker() as server:
        yield server


@pytest.fixture
def services(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
    pg_schema: str,
) -> Services:
    """Hybrid search (the bundled e5) over three memories about Python, all embedded."""
    worker = make_worker(all_projections(embedding_service))
    for i, content in enumerate(CONTENTS):
        ledger.create_memory(
            "alice",
            scope=Scope.global_(),
            memory_key=f"python_{i}",
            content=content,
            category="preference",
        )
    worker.catch_up()
    return Services(
        ledger=ledger,
        reads=Reads(worker.pool, pg_schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
        embeddings=embedding_service,
    )


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services), raise_server_exceptions=False) as test_client:
        body = test_client.get("/readyz").json()
        assert body["search"] == "hybrid" and body["degraded"] is False
        yield test_client


def use(services: Services, reranker: Reranker | None) -> None:
    services.search = MemorySearch(None, reranker=reranker)


def http_reranker(fake: FakeReranker, *, budget: float = 2.0, **options: Any) -> Reranker:
    return Reranker(HttpScorer(fake.url, timeout=budget, **options), budget=budget)


def search(client: TestClient, auth: Auth, **body: Any) -> list[tuple[str, float]]:
    response = client.post(
        "/tools/search_core_memories",
        json={"query": "python", **body},
        headers=auth("alice", workspace="learning"),
    )
    assert response.status_code == 200, response.text
    return [(i["content"], i["relevance"]) for i in response.json()["items"]]


def outcomes(client: TestClient) -> dict[str, float]:
    lines = client.get("/metrics").text.splitlines()
    prefix = 'memledger_reranks_total{outcome="'
    return {
        line[len(prefix) :].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(prefix)
    }


def fused(client: TestClient, auth: Auth, services: Services) -> list[tuple[str, float]]:
    """The order and relevance without a reranker."""
    reranker = services.search.reranker if services.search is not None else None
    use(services, None)
    try:
        return search(client, auth)
    finally:
        use(services, reranker)


@pytest.mark.parametrize("api", ["tei", "cohere"])
def test_the_reranker_orders_the_items_and_gives_their_relevance(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker, api: str
) -> None:
    before = [content for content, _ in fused(client, auth, services)]
    assert sorted(before) == sorted(CONTENTS)
    # the reranker prefers the fusion's last item, then its second, then its first
    fake.scores = {before[2]: 0.91, before[1]: 0.6, before[0]: 0.2}
    use(services, http_reranker(fake, api=api, model="bge-reranker" if api == "cohere" else None))

    assert search(client, auth) == [(before[2], 0.91), (before[1], 0.6), (before[0], 0.2)]
    sent = fake.requests[-1]
    assert sent["query"] == "python"
    if api == "tei":
        assert sorted(sent["texts"]) == sorted(CONTENTS) and sent["raw_scores"] is False
    else:
        assert sent["top_n"] == 3 and sent["model"] == "bge-reranker"
    # abstention applies to the reranker's relevance
    assert [c for c, _ in search(client, auth, min_relevance=0.5)] == [before[2], before[1]]
    assert outcomes(client) == {"applied": 2.0, "timeout": 0.0, "error": 0.0, "skipped": 0.0}
    ready = client.get("/readyz").json()
    assert ready["reranker"] == {
        "status": "ok",
        "model": f"http/{api}" if api == "tei" else "http/bge-reranker",
        "detail": None,
    }
    assert ready["degraded"] is False


def test_raw_logits_become_relevance_through_a_sigmoid(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    before = [content for content, _ in fused(client, auth, services)]
    fake.scores = {before[0]: -2.0, before[1]: 3.0, before[2]: 0.0}
    use(services, http_reranker(fake, scores="logit"))

    found = search(client, auth)
    assert fake.requests[-1]["raw_scores"] is True
    sigmoid = round(1 / (1 + math.exp(-3.0)), 6)
    assert found == [(before[1], sigmoid), (before[2], 0.5), (before[0], round(0.119203, 6))]


def test_only_the_first_candidates_are_reranked_and_the_rest_follow_below_them(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    before = [content for content, _ in fused(client, auth, services)]
    fake.scores = {before[0]: 0.3, before[1]: 0.8}
    use(services, Reranker(HttpScorer(fake.url), top=2, budget=2.0))

    assert search(client, auth) == [(before[1], 0.8), (before[0], 0.3), (before[2], 0.3)]
    assert sorted(fake.requests[-1]["texts"]) == sorted(before[:2])


def test_a_slow_reranker_leaves_the_fused_order_counts_a_timeout_and_degrades_readiness(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    expected = fused(client, auth, services)
    fake.delay = 1.0
    use(services, http_reranker(fake, budget=0.1))

    started = time.perf_counter()
    assert search(client, auth) == expected
    assert time.perf_counter() - started < 0.9  # it did not wait for the answer
    assert outcomes(client)["timeout"] == 1.0
    ready = client.get("/readyz")
    body = ready.json()
    assert ready.status_code == 200 and body["status"] == "ready" and body["degraded"] is True
    assert body["reranker"]["status"] == "failing"
    assert body["reranker"]["detail"] == "no answer within 100 ms"
    assert 'memledger_reranker_available{model="http/tei"} 0.0' in client.get("/metrics").text
    # backing off: the next search does not ask it, and keeps the fused order at once
    fake.delay = 0.0
    asked = len(fake.requests)
    assert search(client, auth) == expected and len(fake.requests) == asked
    assert outcomes(client)["skipped"] == 1.0


def _nan(body: dict[str, Any]) -> bytes:
    return b'[{"index": 0, "score": NaN}, {"index": 1, "score": 0.5}, {"index": 2, "score": 0.5}]'


def _scores(*items: Any) -> Callable[[dict[str, Any]], bytes]:
    return lambda body: json.dumps(list(items)).encode()


BROKEN: dict[str, tuple[int, Callable[[dict[str, Any]], bytes]]] = {
    "http 500": (500, lambda body: b'{"error": "overloaded"}'),
    "not json": (200, lambda body: b"<html>oops</html>"),
    "not a list": (200, lambda body: b'{"scores": [0.1, 0.2, 0.3]}'),
    "too few": (200, _scores({"index": 0, "score": 0.9}, {"index": 1, "score": 0.1})),
    "repeated index": (200, _scores(*({"index": 0, "score": 0.5} for _ in range(3)))),
    "index out of range": (
        200,
        _scores(*({"index": i, "score": 0.5} for i in (0, 1, 7))),
    ),
    "nan": (200, _nan),
    "outside 0..1": (200, _scores(*({"index": i, "score": 4.2} for i in range(3)))),
    "a string score": (200, _scores(*({"index": i, "score": "high"} for i in range(3)))),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_an_error_or_a_malformed_answer_leaves_the_fused_order_and_is_counted(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker, case: str
) -> None:
    expected = fused(client, auth, services)
    fake.status, fake.answer = BROKEN[case]
    reranker = http_reranker(fake)
    reranker.retry_after = 0.0  # ask again at once
    use(services, reranker)

    assert search(client, auth) == expected
    assert outcomes(client)["error"] == 1.0
    body = client.get("/readyz").json()
    assert body["degraded"] is True and body["reranker"]["status"] == "failing"
    # once it answers again, its order is used and readiness is whole again
    fake.status, fake.answer = 200, None
    fake.scores = {expected[2][0]: 0.99}
    assert search(client, auth)[0] == (expected[2][0], 0.99)
    body = client.get("/readyz").json()
    assert body["degraded"] is False and body["reranker"]["status"] == "ok"


def test_an_unreachable_reranker_leaves_the_fused_order(
    client: TestClient, auth: Auth, services: Services
) -> None:
    expected = fused(client, auth, services)
    with fake_reranker() as gone:
        url = gone.url  # a port nothing listens on any more
    use(services, Reranker(HttpScorer(url), budget=1.0))
    assert search(client, auth) == expected
    assert outcomes(client)["error"] == 1.0


def test_off_is_the_default_and_changes_nothing(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    assert Settings().reranker == "off" and build_reranker(Settings()) is None
    expected = fused(client, auth, services)
    use(services, build_reranker(Settings(reranker_url=fake.url)))  # a URL alone turns nothing on

    assert search(client, auth) == expected
    assert fake.requests == []
    body = client.get("/readyz").json()
    assert body["reranker"] == {"status": "off", "model": None, "detail": None}
    assert body["degraded"] is False
    assert "memledger_rerank" not in client.get("/metrics").text


def test_the_settings_build_an_http_reranker(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    expected = fused(client, auth, services)
    fake.scores = {expected[2][0]: 0.97}
    settings = Settings(
        reranker="http", reranker_url=fake.url, reranker_top=5, reranker_budget_ms=2000
    )
    reranker = build_reranker(settings)
    assert reranker is not None and reranker.top == 5 and reranker.budget == 2.0
    use(services, reranker)
    assert search(client, auth)[0] == (expected[2][0], 0.97)


def test_the_cache_never_serves_a_fallback_as_a_reranked_result(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    expected = fused(client, auth, services)
    fake.delay, fake.scores = 0.5, {expected[2][0]: 0.99}
    reranker = http_reranker(fake, budget=0.1)
    reranker.retry_after = 0.0
    services.search = MemorySearch(QueryCache(ttl=60), reranker=reranker)

    assert search(client, auth) == expected  # timed out: the fused order, not kept as reranked
    fake.delay = 0.0
    reranked = search(client, auth)
    assert reranked[0] == (expected[2][0], 0.99)
    asked = len(fake.requests)
    assert search(client, auth) == reranked and len(fake.requests) == asked  # a cache hit


def test_while_the_reranker_is_left_alone_the_cache_serves_the_fused_result(
    client: TestClient, auth: Auth, services: Services, fake: FakeReranker
) -> None:
    expected = fused(client, auth, services)
    fake.status, fake.answer = 500, lambda body: b"{}"
    reranker = http_reranker(fake)  # left alone for 30 s after a failure
    services.search = MemorySearch(QueryCache(ttl=60), reranker=reranker)

    assert search(client, auth) == expected  # the error: the fused order, cached as such
    assert search(client, auth) == expected  # served from the cache, the reranker not asked
    assert len(fake.requests) == 1 and outcomes(client)["skipped"] == 0.0
