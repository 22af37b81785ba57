"""Optional tracing: a span per request that joins the caller's W3C trace; a clear error
when MEMLEDGER_OTEL=on but the otel extra is missing."""

from __future__ import annotations

import sys

import pytest
from fastapi.testclient import TestClient

from api.tracing import TracingUnavailable, tracing
from tests.api.offline import offline_app

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_a_request_span_continues_the_callers_trace() -> None:
    memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = memory.InMemorySpanExporter()
    with TestClient(tracing(exporter=exporter)(offline_app())) as client:
        headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
        assert client.get("/me/core-memories", headers=headers).status_code == 401
        assert client.get("/healthz", headers=headers).status_code == 200  # probes: no span
    spans = exporter.get_finished_spans()
    assert len(spans) == 1
    (span,) = spans
    assert format(span.context.trace_id, "032x") == TRACE
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT
    assert span.attributes is not None
    assert (
        span.attributes.get("http.response.status_code", span.attributes.get("http.status_code"))
        == 401
    )


def test_without_the_extra_tracing_refuses_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.instrumentation.asgi", None)
    with pytest.raises(TracingUnavailable, match=r"pip install 'memledger\[otel\]'"):
        tracing()


def test_serve_stops_at_once_when_tracing_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from api.cli.serve import _tracing

    monkeypatch.setitem(sys.modules, "opentelemetry.instrumentation.asgi", None)
    with pytest.raises(typer.Exit) as stopped:
        _tracing(True, None)
    assert stopped.value.exit_code == 2
    assert _tracing(False, None)("app") == "app"
