"""Operational endpoints over HTTP: health, readiness, metrics, request ids."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from api.access_log import AccessLog
from api.app import create_app
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope


def test_healthz_answers_while_the_process_is_up(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.json() == {"status": "ok"} and response.headers["X-Request-ID"]


def test_readyz_reports_the_ledger_position_and_lag(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["ledger_position"] == 0


def test_readyz_is_503_while_projections_lag_too_far(
    ledger: MemoryLedger, services: Services
) -> None:
    assert services.worker is not None
    services.worker.stop()
    for i in range(3):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        )
    with TestClient(create_app(services, max_lag=2)) as client:
        lagging = client.get("/readyz")
        services.worker.catch_up()
        caught_up = client.get("/readyz")
    assert lagging.status_code == 503 and lagging.json()["status"] == "lagging"
    assert caught_up.status_code == 200
    assert set(caught_up.json()["projection_lag"].values()) == {0}


def test_readyz_is_503_when_the_ledger_is_unreachable(
    ledger: MemoryLedger, services: Services
) -> None:
    app = create_app(services)
    ledger.close()  # the pool is gone: every query fails
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"


def test_metrics_are_prometheus_text(
    client: TestClient, auth: Callable[..., dict[str, str]]
) -> None:
    client.get("/me/core-memories", headers=auth())
    text = client.get("/metrics").text
    assert "memledger_http_requests_total" in text and 'route="/me/core-memories"' in text
    assert 'memledger_projection_lag{projection="active_memories"}' in text
    assert "memledger_expired_memories 0.0" in text


def test_access_audit_records_are_counted(
    services: Services, auth: Callable[..., dict[str, str]]
) -> None:
    services.access_log = log = AccessLog(services.ledger, interval=0.01)  # as serve builds it
    body = {"memory_key": "k", "content": "tea", "category": "preference", "scope_type": "global"}
    with TestClient(create_app(services)) as client:
        created = client.post("/me/core-memories", json=body, headers=auth()).json()
        client.get(f"/me/core-memories/{created['memory_id']}", headers=auth())  # one read
        assert log.flush()
        text = client.get("/metrics").text
    assert "memledger_access_records_written_total 1.0" in text
    assert "memledger_access_records_dropped_total 0.0" in text
    assert "memledger_access_records_pending 0.0" in text


def test_a_caller_request_id_is_echoed_and_a_bad_one_replaced(client: TestClient) -> None:
    assert (
        client.get("/healthz", headers={"X-Request-ID": "req-42"}).headers["X-Request-ID"]
        == "req-42"
    )
    replaced = client.get("/healthz", headers={"X-Request-ID": "bad id\n"}).headers["X-Request-ID"]
    assert replaced != "bad id\n" and len(replaced) == 32


def test_conflicts_are_counted_by_reason(
    client: TestClient, auth: Callable[..., dict[str, str]]
) -> None:
    body = {"memory_key": "k", "content": "tea", "category": "preference", "scope_type": "global"}
    client.post("/me/core-memories", json=body, headers=auth())
    assert (
        client.post(
            "/me/core-memories", json=body | {"content": "coffee"}, headers=auth()
        ).status_code
        == 409
    )
    assert 'memledger_conflicts_total{reason="key_exists"} 1.0' in client.get("/metrics").text


def test_reads_are_refused_rather_than_stale_when_projections_lag(
    services: Services, auth: Callable[..., dict[str, str]]
) -> None:
    assert services.worker is not None
    services.worker.stop()  # projections stop following the ledger
    services.read_timeout = 0.2
    with TestClient(create_app(services)) as client:
        body = {"memory_key": "k", "content": "tea", "category": "fact", "scope_type": "global"}
        assert client.post("/me/core-memories", json=body, headers=auth()).status_code == 201
        stale = client.get("/me/core-memories", headers=auth())
    assert stale.status_code == 503 and stale.headers["Retry-After"] == "1"
