"""One event a projection cannot apply stalls nothing (issue 13, 1): reads, readiness, metrics.

Before: a candidate proposal holding NUL stalled the candidates projection for good, and every
user's read-after-write (which waited for every projection) answered 503, as did /readyz.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import Outcome
from projections.reads import Reads
from projections.registry import main_projections
from projections.tracking import Tables
from projections.views.candidates import Candidates
from projections.worker import ProjectionWorker
from tests.conftest import JWT_SECRET
from tests.poison import propose_with_nul

Auth = Callable[..., dict[str, str]]
MEMORY = {
    "scope_type": "global",
    "memory_key": "tea",
    "content": "green tea in the morning",
    "category": "preference",
}


def remember(client: TestClient, auth: Auth, user: str = "alice") -> dict[str, Any]:
    response = client.post("/me/core-memories", json=MEMORY, headers=auth(user))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_poisoned_candidate_stalls_no_read_and_leaves_the_service_ready_but_degraded(
    client: TestClient, ledger: MemoryLedger, services: Services, auth: Auth
) -> None:
    poisoned = propose_with_nul(ledger, "mallory")
    memory = remember(client, auth)  # a later write of another user
    listed = client.get("/me/core-memories", headers=auth())
    assert listed.status_code == 200 and [m["memory_id"] for m in listed.json()["items"]] == [
        memory["memory_id"]
    ]
    services.wrote("mallory", Outcome("created", position=poisoned))  # as if via the API
    assert client.get("/me/memory-candidates", headers=auth("mallory")).status_code == 200
    audit = client.get("/audit/events", headers=auth("audrey", roles=["auditor"]))
    assert audit.status_code == 200 and poisoned in [e["position"] for e in audit.json()["items"]]

    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready" and body["degraded"] is True
    assert body["quarantined"]["candidates"] == 1 and body["quarantined"]["active_memories"] == 0
    metrics = client.get("/metrics").text
    assert 'memledger_projection_quarantined_events{projection="candidates"} 1.0' in metrics
    assert 'memledger_projection_quarantined_events{projection="audit_log"} 0.0' in metrics


def test_readyz_is_not_degraded_by_an_empty_quarantine(client: TestClient) -> None:
    body = client.get("/readyz").json()
    assert set(body["quarantined"].values()) == {0}


class StalledCandidates(Candidates):
    """A candidates projection that cannot run at all (not quarantined: it never moves)."""

    def apply(self, cur: Any, t: Tables, batch: Any) -> None:
        raise psycopg.errors.UndefinedTable("relation does not exist")


@pytest.fixture
def stalled_client(
    ledger: MemoryLedger, make_worker: Callable[..., ProjectionWorker], pg_schema: str
) -> Iterator[TestClient]:
    others = [p for p in main_projections() if p.name != Candidates.name]
    worker = make_worker([StalledCandidates(), *others])
    worker.start()
    services = Services(
        ledger=ledger,
        reads=Reads(worker.pool, pg_schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
        read_timeout=0.5,
    )
    with TestClient(create_app(services), raise_server_exceptions=False) as client:
        yield client


def test_a_read_waits_only_for_the_projections_it_reads(
    stalled_client: TestClient, auth: Auth
) -> None:
    client = stalled_client
    memory = remember(client, auth)
    memory_id = memory["memory_id"]
    agent = auth("alice", workspace="learning")
    answers = {
        "list": client.get("/me/core-memories", headers=auth()),
        "get": client.get(f"/me/core-memories/{memory_id}", headers=auth()),
        "versions": client.get(f"/me/core-memories/{memory_id}/versions", headers=auth()),
        "legacy": client.get("/me/memories", headers=auth()),
        "search": client.post(
            "/tools/search_core_memories", json={"query": "green tea"}, headers=agent
        ),
        "tool list": client.post("/tools/list_core_memories", json={}, headers=agent),
        "audit": client.get("/audit/events", headers=auth("audrey", roles=["auditor"])),
    }
    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 200)
    assert [m["memory_id"] for m in answers["list"].json()["items"]] == [memory_id]
    assert answers["search"].json()["items"][0]["memory_id"] == memory_id
    # The one read of the stalled projection cannot show the write: 503, not a stale answer.
    assert client.get("/me/memory-candidates", headers=auth()).status_code == 503
