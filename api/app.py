"""The FastAPI application, built once from its services; routes live in api/routes/."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.console import mount_console
from api.deadline import Deadline
from api.errors import install_error_handlers, unavailable
from api.mcp.http import mount_mcp
from api.metrics import StateCollector
from api.middleware import Admission, BodyLimit, RequestContext, WritePosition
from api.openapi import document, mount_docs, operation_id
from api.routes import (
    audit,
    audit_replay,
    candidates,
    changes,
    legacy,
    memories,
    settings,
    tools,
)
from api.schemas.errors import ERROR_RESPONSES
from api.services import Services
from api.version import package_version
from projections.worker import ProjectionWorker
from retrieval.rerank import RerankState
from retrieval.vectors.store import VectorReads

__all__ = ["create_app"]


def create_app(services: Services, *, max_lag: int = 1000) -> FastAPI:
    """The HTTP API of API_CONTRACT.md over one ledger and its projections."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(services.close)  # at shutdown: write queued access records

    app = FastAPI(
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        docs_url=None,  # mount_docs: the same pages from local assets
        redoc_url=None,
        title="memledger",
        version=package_version(),  # the contract's own: info.x-contract-version (document)
        summary="An event-sourced memory ledger for AI agents: memories the user owns.",
        responses=ERROR_RESPONSES,
    )
    app.state.services = services
    document(app)
    mount_docs(app)
    install_error_handlers(app)
    app.add_middleware(WritePosition)
    app.add_middleware(BodyLimit, limit=services.max_body_bytes)
    if services.request_deadline is not None:
        # Inside RequestContext: a 503 for a late request carries its id and is counted.
        app.add_middleware(
            Deadline,
            seconds=services.request_deadline,
            # Late for any reason (a statement, a queue, a model loading): said as such, not
            # blamed on the ledger.
            late=lambda: unavailable(
                services.retry_after,
                f"not answered within the request deadline ({services.request_deadline:g} s);"
                " retry",
            ),
        )
    # Outside the deadline: a request refused at the limits is answered at once.
    app.add_middleware(Admission, limit=services.max_concurrency, retry_after=services.retry_after)
    app.add_middleware(RequestContext, metrics=services.metrics)  # outermost: ids every answer
    services.metrics.watch(
        StateCollector(
            lags=lambda: {**_lags(services.worker), **_lags(services.embedding_worker)},
            quarantined=lambda: _quarantined(services),
            expired=services.reads.expired_count,
            embeddings=lambda: services.embeddings.state() if services.embeddings else None,
            reranker=lambda: _reranker(services),
            access=lambda: services.access_log.state() if services.access_log else None,
            unembedded=VectorReads(services.reads).without_vector,
        )
    )
    for module in (memories, changes, legacy, candidates, settings, tools, audit, audit_replay):
        app.include_router(module.router)
    mount_console(app)
    mount_mcp(app)  # the same tools over MCP at /mcp

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """200 while the process is up."""
        # async and touching nothing: answered on the event loop, never queued behind
        # requests blocked on the database in the thread pool.
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], response_model=None)
    def readyz() -> Any:
        """200 when the ledger is reachable and projections lag at most `max_lag` events.

        Quarantined events (a projection set aside events it could not apply) leave it ready
        but `degraded`, with the count per projection under `quarantined`; so do embeddings
        off or failing (`embeddings`, search lexical) and a failing reranker (`reranker`,
        searches keep the fused order).
        """
        retry_after = {"Retry-After": str(services.retry_after)}
        try:
            position = services.ledger.recorded()
            lags = _lags(services.worker)
            embedding_lags = _lags(services.embedding_worker)
            quarantined = _quarantined(services)
        except Exception as error:  # any failure means not ready
            return JSONResponse(
                {"status": "unavailable", "detail": type(error).__name__},
                status_code=503,
                headers=retry_after,
            )
        search = _search_state(services)
        body = {
            "ledger_position": position,
            "projection_lag": {**lags, **embedding_lags},
            "quarantined": quarantined,
            **search,
            "degraded": search["degraded"] or any(quarantined.values()),
        }
        # Embeddings lagging (a bulk import being embedded) only delay vectors: still ready.
        if any(lag > max_lag for lag in lags.values()):
            return JSONResponse({"status": "lagging", **body}, status_code=503, headers=retry_after)
        return {"status": "ready", **body}

    @app.get("/metrics", tags=["operations"], response_class=Response)
    def metrics() -> Response:
        """Prometheus text format."""
        return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _lags(worker: ProjectionWorker | None) -> dict[str, int]:
    return {s.name: s.lag for s in worker.status()} if worker is not None else {}


def _quarantined(services: Services) -> dict[str, int]:
    """Events each projection set aside (0: none), main projections and embeddings."""
    counts: dict[str, int] = {}
    for worker in (services.worker, services.embedding_worker):
        if worker is not None:
            counts.update(worker.quarantined())
    return counts


def _reranker(services: Services) -> RerankState | None:
    reranker = services.search.reranker if services.search is not None else None
    return reranker.state() if reranker is not None else None


def _search_state(services: Services) -> dict[str, Any]:
    """Hybrid or lexical search: degraded (still ready) when embeddings are off or failing, or
    when a configured reranker is failing (searches keep the fused order meanwhile)."""
    state = services.embeddings.state() if services.embeddings is not None else None
    if state is None or state.model_id is None:
        embeddings = {"status": "off", "model": None, "detail": "no embedder configured"}
    elif state.available:
        embeddings = {"status": "ok", "model": state.model_id, "detail": None}
    else:
        embeddings = {"status": "failing", "model": state.model_id, "detail": state.error}
    rerank = _reranker(services)
    if rerank is None:
        reranker = {"status": "off", "model": None, "detail": None}
    else:
        status = "ok" if rerank.available else "failing"
        reranker = {"status": status, "model": rerank.name, "detail": rerank.error}
    return {
        "degraded": embeddings["status"] != "ok" or reranker["status"] == "failing",
        "search": "hybrid" if embeddings["status"] == "ok" else "lexical",
        "embeddings": embeddings,
        "reranker": reranker,
    }
