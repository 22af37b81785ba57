"""Operational endpoints over HTTP."""

from __future__ import annotations

from fastapi.testclient import TestClient

from api.app import create_app
from domain.ledger.ledger import MemoryLedger


def test_healthz_answers_while_the_process_is_up(ledger: MemoryLedger) -> None:
    with TestClient(create_app(ledger)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_reports_the_ledger_position(ledger: MemoryLedger) -> None:
    with TestClient(create_app(ledger)) as client:
        response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["ledger_position"] == 0


def test_readyz_is_503_when_the_ledger_is_unreachable(ledger: MemoryLedger) -> None:
    app = create_app(ledger)
    ledger.close()  # the pool is gone: every query fails
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
