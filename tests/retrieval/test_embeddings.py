"""The embeddings projection and hybrid search against real PostgreSQL (the bundled model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.rebuild import rebuild
from projections.registry import all_projections, select
from projections.tracking import Tables
from projections.views.embeddings import open_vector
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbedderError, EmbeddingService, from_bytes, passage_text

pytestmark = pytest.mark.integration
SECRET = "test-secret-of-at-least-32-bytes-long!"


def vector_row(worker: ProjectionWorker, memory_id: UUID) -> tuple[Any, ...] | None:
    with worker.pool.connection() as conn:
        row = conn.execute(
            f"SELECT revision, model, vector FROM {worker.schema}.memledger_embeddings"
            " WHERE memory_id = %s",
            (memory_id,),
        ).fetchone()
    if row is None:
        return None
    # The vector is stored sealed with the memory's data key.
    return (*row[:2], open_vector(Tables(worker.schema).seal, memory_id, row[2]))


def create(ledger: MemoryLedger, key: str, content: str, user: str = "alice") -> UUID:
    outcome = ledger.create_memory(
        user, scope=Scope.global_(), memory_key=key, content=content, category="constraint"
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def test_a_memory_gets_a_vector_and_forgetting_deletes_it(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    memory_id = create(ledger, "study_time", "工作日每天只能学习一小时")
    worker.catch_up()

    row = vector_row(worker, memory_id)
    assert row is not None and row[0] == 1 and row[1] == embedding_service.model_id
    expected = embedding_service.passages([passage_text("study_time", "工作日每天只能学习一小时")])
    assert expected is not None
    assert np.array_equal(from_bytes(row[2], expected.shape[1]), expected)

    ledger.forget_memory("alice", memory_id)
    worker.catch_up()
    assert vector_row(worker, memory_id) is None


def test_a_changed_memory_is_re_embedded(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    memory_id = create(ledger, "editor", "I write code in Neovim.")
    worker.catch_up()
    before = vector_row(worker, memory_id)

    ledger.update_memory("alice", memory_id, expected_revision=1, content="I use VS Code now.")
    worker.catch_up()
    after = vector_row(worker, memory_id)

    expected = embedding_service.passages([passage_text("editor", "I use VS Code now.")])
    assert before is not None and after is not None and expected is not None
    assert after[0] == 2 and after[2] != before[2]
    assert np.array_equal(from_bytes(after[2], expected.shape[1]), expected)


def _client(worker: ProjectionWorker, ledger: MemoryLedger, embeddings: EmbeddingService) -> Any:
    services = Services(
        ledger=ledger,
        reads=Reads(worker.pool, worker.schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=SECRET,
        worker=worker,
        embeddings=embeddings,
    )
    return TestClient(create_app(services))


def _search(client: TestClient, query: str) -> list[str]:
    token = mint_token(SECRET, "alice", workspace="learning")
    response = client.post(
        "/tools/search_core_memories",
        json={"query": query},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    return [item["memory_key"] for item in response.json()["items"]]


def test_hybrid_search_finds_a_cross_language_memory_and_nothing_for_an_unrelated_query(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    create(ledger, "study_time", "工作日每天只能学习一小时,周末可以学习四小时。")
    create(ledger, "editor", "编辑器用 Neovim,不需要 VS Code 相关的操作说明。")
    worker.catch_up()
    with _client(worker, ledger, embedding_service) as client:
        # answered: the answer first, the other candidates after it by evidence
        assert _search(client, "how long can I study on weekdays")[0] == "study_time"
        assert _search(client, "how do I repot an orchid") == []
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready" and ready["degraded"] is False
        assert ready["search"] == "hybrid"


class Broken:
    model_id = "broken/model"

    def passages(self, texts: Any) -> Any:
        raise EmbedderError("the endpoint is down")

    def query(self, text: str) -> Any:
        raise EmbedderError("the endpoint is down")


@pytest.mark.parametrize("embedder", [None, Broken()], ids=["off", "failing"])
def test_search_falls_back_to_lexical_and_says_so(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], embedder: Any
) -> None:
    embeddings = EmbeddingService(embedder)
    worker = make_worker(all_projections(embeddings))
    memory_id = create(ledger, "study_time", "工作日每天只能学习一小时")
    worker.catch_up()  # a failing embedder does not stop the projection: no vector stored
    row = vector_row(worker, memory_id)
    assert row is not None and row[2] is None
    with _client(worker, ledger, embeddings) as client:
        assert _search(client, "学习") == ["study_time"]  # lexical still answers
        assert _search(client, "how many hours on weekdays") == []  # no vector, no paraphrase
        response = client.get("/readyz")
        body = response.json()
        assert response.status_code == 200 and body["status"] == "ready"
        assert body["degraded"] is True and body["search"] == "lexical"
        assert body["embeddings"]["status"] == ("off" if embedder is None else "failing")
        metrics = client.get("/metrics").text
        assert "memledger_embedder_available{model=" in metrics
        available = next(line for line in metrics.splitlines() if line.startswith("memledger_em"))
        assert available.endswith(" 0.0")
        assert "memledger_memories_without_vector 1.0" in metrics
        assert "工作日" not in metrics


def test_rebuild_backfills_vectors_with_progress(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
) -> None:
    worker = make_worker(all_projections())  # embeddings off: rows without vectors
    ids = [create(ledger, f"note_{i}", f"memory number {i} about topic {i}") for i in range(5)]
    ledger.forget_memory("alice", ids[0])
    worker.catch_up()
    assert all(vector_row(worker, i) is None or vector_row(worker, i)[2] is None for i in ids)  # type: ignore[index]

    seen: list[int] = []
    report = rebuild(
        ledger,
        worker.pool,
        worker.schema,
        select(["embeddings"], embedding_service),
        batch_size=2,
        progress=seen.append,
    )
    assert sum(seen) == ledger.recorded() == report.events and len(seen) > 1
    # 4 rows replaced by rows with vectors; nothing quarantined, live or rebuilt
    assert report.differences == {"embeddings": 8, "quarantine/embeddings": 0}
    assert vector_row(worker, ids[0]) is None  # forgotten: no row, no vector
    for memory_id in ids[1:]:
        row = vector_row(worker, memory_id)
        assert row is not None and row[1] == embedding_service.model_id and row[2] is not None
