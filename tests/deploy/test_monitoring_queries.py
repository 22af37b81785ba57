"""Every query of the Grafana dashboard and of the alert rules (deploy/monitoring/) names
metrics and labels that a scrape of the service's /metrics really holds.

The app runs against this test's schema with hybrid search (the bundled e5) and an HTTP
reranker (tests/rerank_server.py), and answers a write, a conflict, searches, a refusal of
each kind and a candidate decision, so every counter and histogram has samples; then each
query is read (tests/deploy/promql.py) and its selectors, matchers, grouping labels, legends
and annotation templates are checked against the scrape."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.access_log import AccessLog
from api.app import create_app
from api.deps import Services
from api.metrics import Metrics
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import token
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.rerank import Reranker
from retrieval.rerankers import HttpScorer
from retrieval.search import MemorySearch
from retrieval.vectors.service import EmbeddingService
from tests.conftest import JWT_SECRET
from tests.deploy.promql import mismatches, read_query
from tests.rerank_server import FakeReranker, fake_reranker

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "memledger.json"
ALERTS = MONITORING / "alerts.yml"
TARGET_LABELS = frozenset({"job", "instance"})
"""Labels Prometheus adds to every scraped series."""
PROMETHEUS_SERIES = {"up": TARGET_LABELS}
"""Series Prometheus makes itself for each target (not on /metrics)."""

Auth = Callable[..., dict[str, str]]
Scrape = dict[str, frozenset[str]]  # sample name → its labels


@pytest.fixture
def services(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
    pg_schema: str,
) -> Iterator[Services]:
    worker = make_worker(all_projections(embedding_service))
    worker.start()
    with fake_reranker() as fake:
        yield Services(
            ledger=ledger,
            reads=Reads(worker.pool, pg_schema, worker.ledger.partition),
            metrics=Metrics(),
            jwt_secret=JWT_SECRET,
            worker=worker,
            embeddings=embedding_service,
            search=MemorySearch(None, reranker=reranker(fake)),
        )


def reranker(fake: FakeReranker) -> Reranker:
    return Reranker(HttpScorer(fake.url, timeout=2.0), budget=2.0)


def exercise(client: TestClient, auth: Auth, services: Services) -> str:
    """A request of each kind the metrics count; the scrape's text afterwards."""
    agent = auth("alice", workspace="learning")
    memory = {"memory_key": "editor", "content": "I write Python in Neovim"}
    memory |= {"category": "preference", "scope_type": "global"}
    created = client.post("/me/core-memories", json=memory, headers=auth())
    assert created.status_code == 201, created.text
    conflict = memory | {"content": "I write Python in Emacs"}
    assert client.post("/me/core-memories", json=conflict, headers=auth()).status_code == 409
    after = {"X-Min-Position": created.headers["X-Position"]}
    search = {"query": "python editor"}
    found = client.post("/tools/search_core_memories", json=search, headers=agent | after)
    assert found.status_code == 200 and found.json()["items"], found.text
    denied = client.post(
        "/tools/save_core_memory",
        json=memory,
        headers=auth("alice", workspace="learning", mode="no_write"),
    )
    assert denied.status_code == 403, denied.text
    with services.limits.hold("alice", "search"):
        limited = client.post("/tools/search_core_memories", json=search, headers=agent)
    assert limited.status_code == 429, limited.text
    outcome = services.ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.workspace("learning"),
        memory_key="style",
        content="I prefer examples first",
        category="preference",
        source_conversation_id="conv-1",
    )
    assert outcome.candidate is not None
    accepted = client.post(
        f"/me/memory-candidates/{outcome.candidate.candidate_id}/accept",
        headers=auth() | {"X-Min-Position": token(services.ledger.position("alice"))},
    )
    assert accepted.status_code == 200, accepted.text
    return client.get("/metrics").text


def scraped(text: str) -> Scrape:
    """Each sample name of the scrape with the labels its samples carry (and the target's)."""
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(found) | TARGET_LABELS for name, found in labels.items()}


@pytest.fixture
def scrape(services: Services, auth: Auth) -> Scrape:
    services.access_log = AccessLog(services.ledger)  # as serve builds it
    with TestClient(create_app(services), raise_server_exceptions=False) as client:
        text = exercise(client, auth, services)
        assert services.worker is not None
        services.worker.stop()  # before the app's shutdown closes the pools it reads
    return scraped(text) | PROMETHEUS_SERIES


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(panel title, expression, legend) of every target of the dashboard."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [
        (panel["title"], target["expr"], target.get("legendFormat", ""))
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_dashboard_query_names_exported_metrics_and_labels(scrape: Scrape) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    found = {
        f"{title}: {expr}": issues
        for title, expr, legend in queries
        if (
            issues := mismatches(
                read_query(expr), scrape, set(re.findall(r"{{\s*(\w+)\s*}}", legend))
            )
        )
    }
    assert found == {}


def test_every_alert_rule_names_exported_metrics_and_labels(scrape: Scrape) -> None:
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} >= {
        "MemledgerProjectionLagging",
        "MemledgerEventsQuarantined",
        "MemledgerSustained503s",
        "MemledgerEmbedderDown",
    }
    found = {}
    for rule in rules:
        templates = " ".join(rule["annotations"].values())
        shown = set(re.findall(r"\$labels\.(\w+)", templates))
        if issues := mismatches(read_query(rule["expr"]), scrape, shown):
            found[rule["alert"]] = issues
    assert found == {}


def test_the_dashboard_covers_what_operators_watch(scrape: Scrape) -> None:
    """Request rate and latency, 503s, lag, quarantine, embedder, search items and tokens,
    reranker outcomes: each appears in some panel's query."""
    named = {s.name for _, expr, _ in dashboard_queries() for s in read_query(expr).selectors}
    assert named >= {
        "memledger_http_requests_total",
        "memledger_http_request_seconds_bucket",
        "memledger_projection_lag",
        "memledger_projection_quarantined_events",
        "memledger_embedder_available",
        "memledger_search_items_bucket",
        "memledger_search_tokens_bucket",
        "memledger_reranks_total",
    }
    assert named <= set(scrape)
