"""Optional OpenTelemetry tracing: a span per HTTP request, W3C `traceparent` honoured.

Off unless MEMLEDGER_OTEL=on, and then it needs the `otel` extra
(`pip install 'memledger[otel]'`); without it `serve` refuses to start with that hint.

    wrap = tracing(endpoint="http://collector:4318/v1/traces")   # fails now, not later
    uvicorn.run(wrap(create_app(services)))

Spans go to an OTLP/HTTP collector (`endpoint`, else the OTEL_EXPORTER_OTLP_* variables).
The incoming `traceparent` makes each request's span a child of the caller's trace. Probes
and scrapes (/healthz, /readyz, /metrics) are not traced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp

__all__ = ["TracingUnavailable", "tracing"]

_UNTRACED = "healthz,readyz,metrics"


class TracingUnavailable(RuntimeError):
    """Tracing was asked for but the `otel` extra is not installed."""


def tracing(endpoint: str | None = None, exporter: Any = None) -> Callable[[ASGIApp], ASGIApp]:
    """A wrapper that traces an ASGI app; `exporter` (tests: an in-memory one) replaces OTLP.

    Raises TracingUnavailable at once when the OpenTelemetry packages are missing.
    """
    try:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as error:
        raise TracingUnavailable(
            f"MEMLEDGER_OTEL=on needs the otel extra: pip install 'memledger[otel]' ({error})"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": "memledger"}))
    if exporter is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as error:
            raise TracingUnavailable(
                f"MEMLEDGER_OTEL=on needs the otel extra: pip install 'memledger[otel]' ({error})"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))

    def wrap(app: ASGIApp) -> ASGIApp:
        return OpenTelemetryMiddleware(
            app,
            excluded_urls=_UNTRACED,
            tracer_provider=provider,
            exclude_spans=["receive", "send"],  # one span per request, not per message
        )

    return wrap
