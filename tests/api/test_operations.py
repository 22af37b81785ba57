"""Operational endpoints over HTTP."""

from __future__ import annotations

from fastapi.testclient import TestClient

from api.app import create_app
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.worker import ProjectionWorker


def test_healthz_answers_while_the_process_is_up(ledger: MemoryLedger) -> None:
    with TestClient(create_app(ledger)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_reports_the_ledger_position(ledger: MemoryLedger) -> None:
    with TestClient(create_app(ledger)) as client:
        response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["ledger_position"] == 0


def test_readyz_is_503_while_projections_lag_too_far(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    for i in range(3):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        )
    with TestClient(create_app(ledger, worker, max_lag=2)) as client:
        lagging = client.get("/readyz")
        worker.catch_up()
        caught_up = client.get("/readyz")
    assert lagging.status_code == 503 and lagging.json()["status"] == "lagging"
    assert caught_up.status_code == 200 and set(caught_up.json()["projection_lag"].values()) == {0}


def test_readyz_is_503_when_the_ledger_is_unreachable(ledger: MemoryLedger) -> None:
    app = create_app(ledger)
    ledger.close()  # the pool is gone: every query fails
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
