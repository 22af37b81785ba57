"""A search's query embedding is bounded: capped text, a fair queue, a budget with a lexical
fallback (the searches over HTTP against real PostgreSQL)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.vectors.queue import FairQueue, OverShare
from retrieval.vectors.service import QUERY_CHARS, EmbeddingService, Vectors, capped, normalised
from tests.retrieval.test_vector_matrix import bag_of_words

pytestmark = pytest.mark.integration
SECRET = "test-secret-of-at-least-32-bytes-long!"


class Recording:
    """Bag-of-words vectors; remembers every query text it was given. `gate`: queries holding
    `BLOCK` wait for it (a model stuck on a long query)."""

    BLOCK = "zzblock"

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.queries: list[str] = []
        self.gate = threading.Event()
        self.blocked = threading.Event()
        """Set once a query waits at the gate."""

    def passages(self, texts: Sequence[str]) -> Vectors:
        return normalised([bag_of_words(t) for t in texts])

    def query(self, text: str) -> Vectors:
        self.queries.append(text)
        if self.BLOCK in text:
            self.blocked.set()
            self.gate.wait(timeout=60)
        return normalised(bag_of_words(text))


def test_the_embedded_text_is_capped_without_cutting_a_latin_word() -> None:
    assert capped("short query", 100) == "short query"
    assert capped("我" * 500, 100) == "我" * 100
    sentence = "how long can I study on weekdays and on weekends please"
    assert capped(sentence, 20) == "how long can I study"  # not "…study o"
    assert capped("x" * 50, 20) == "x" * 20  # one long token: cut where it must be


def test_the_queue_runs_the_least_served_user_first_and_drops_cancelled_jobs() -> None:
    queue = FairQueue(1)
    started, release, ran = threading.Event(), threading.Event(), []

    def hold() -> None:
        started.set()
        release.wait(timeout=30)

    first = queue.submit("heavy", hold)
    assert started.wait(timeout=30)
    heavy = [queue.submit("heavy", lambda n=n: ran.append(f"heavy{n}")) for n in range(3)]
    dropped = queue.submit("heavy", lambda: ran.append("dropped"))
    assert dropped.cancel()  # still queued: never runs
    light = queue.submit("light", lambda: ran.append("light"))
    release.set()
    for job in (first, *heavy, light):
        job.result(timeout=30)
    # "heavy" used the worker while the others queued: "light" runs next, then heavy's in order
    assert ran == ["light", "heavy0", "heavy1", "heavy2"]


def test_a_closed_queue_runs_what_it_queued_takes_nothing_more_and_its_threads_end() -> None:
    queue = FairQueue(2, share=None, name="closing-queue")
    started, release = threading.Event(), threading.Event()

    def hold() -> str:
        started.set()
        release.wait(timeout=30)
        return "held"

    held = queue.submit("alice", hold)
    assert started.wait(timeout=30)
    queued = [queue.submit("bob", lambda n=n: n) for n in range(3)]
    queue.close(timeout=0)  # closed at once; its threads still have work
    with pytest.raises(RuntimeError, match="closed"):
        queue.submit("carol", lambda: "late")
    release.set()
    assert held.result(timeout=30) == "held"
    assert [job.result(timeout=30) for job in queued] == [0, 1, 2]
    queue.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("closing-queue")]


def test_a_user_past_their_share_of_a_busy_queue_is_not_embedded() -> None:
    now = [0.0]
    queue = FairQueue(1, share=0.5, half_life=10.0, clock=lambda: now[0])

    def costs(seconds: float) -> Callable[[], None]:
        def work() -> None:
            now[0] += seconds  # the model's time, on the fake clock

        return work

    queue.submit("heavy", costs(2.0)).result(timeout=30)  # an idle queue: anyone embeds
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(timeout=30)

    light = queue.submit("light", hold)
    assert started.wait(timeout=30)
    with pytest.raises(OverShare):  # busy, and heavy used 2 s: its query goes lexical
        queue.submit("heavy", costs(1.0))
    queue.submit("other", costs(0.1))  # a user within their share still queues
    release.set()
    light.result(timeout=30)
    now[0] += 60.0  # six half-lives later heavy's usage is far below its share again
    queue.submit("heavy", costs(0.1)).result(timeout=30)


@pytest.fixture
def search(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker]
) -> Iterator[Callable[..., tuple[Recording, TestClient, EmbeddingService]]]:
    made: list[tuple[Recording, TestClient]] = []

    def make(**options: Any) -> tuple[Recording, TestClient, EmbeddingService]:
        embedder = Recording(f"test/recording-{len(made)}-{id(ledger)}")
        embeddings = EmbeddingService(embedder, **options)
        worker = make_worker(all_projections(embeddings))
        outcome = ledger.create_memory(
            "alice",
            scope=Scope.global_(),
            memory_key="study_time",
            content="weekday study time is one hour",
            category="constraint",
        )
        assert outcome.memory is not None
        worker.catch_up()
        services = Services(
            ledger=ledger,
            reads=Reads(worker.pool, worker.schema, worker.ledger.partition),
            metrics=Metrics(),
            jwt_secret=SECRET,
            worker=worker,
            embeddings=embeddings,
        )
        client = TestClient(create_app(services)).__enter__()
        made.append((embedder, client))
        return embedder, client, embeddings

    yield make
    for embedder, client in made:
        embedder.gate.set()
        client.__exit__(None, None, None)


def searched(client: TestClient, query: str, **options: Any) -> list[str]:
    token = mint_token(SECRET, "alice", workspace="learning")
    response = client.post(
        "/tools/search_core_memories",
        json={"query": query, **options},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    return [item["memory_key"] for item in response.json()["items"]]


def metric(client: TestClient, name: str) -> float:
    line = next(x for x in client.get("/metrics").text.splitlines() if x.startswith(name + " "))
    return float(line.split()[-1])


def test_a_500_character_query_embeds_at_most_the_cap(
    search: Callable[..., tuple[Recording, TestClient, EmbeddingService]],
) -> None:
    embedder, client, _ = search()
    query = ("weekday study " + "and some more words about nothing in particular " * 12)[:500]
    assert len(query) == 500
    # min_relevance 0: the fake embedder's scores are not calibrated; the memory is a candidate
    assert searched(client, query, min_relevance=0) == ["study_time"]
    ours = [q for q in embedder.queries if q.startswith("weekday study")]
    assert ours and all(len(q) <= QUERY_CHARS for q in ours)
    assert metric(client, "memledger_query_embeddings_capped_total") == 1


def test_a_query_embedding_past_its_budget_falls_back_to_lexical_and_says_so(
    search: Callable[..., tuple[Recording, TestClient, EmbeddingService]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder, client, embeddings = search(query_budget=0.2)
    with caplog.at_level(logging.WARNING, logger="retrieval.vectors.service"):
        found = searched(client, f"weekday study {Recording.BLOCK}")
    assert found == ["study_time"]  # answered, from the lexical match alone
    assert metric(client, "memledger_query_embedding_timeouts_total") == 1
    assert any("lexical search" in r.getMessage() for r in caplog.records)
    assert embeddings.state().available  # slow is not failing: the next search tries again
    embedder.gate.set()
