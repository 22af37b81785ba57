"""The FastAPI application: built once from a ready ledger (routes are added by resource)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from domain.ledger.ledger import MemoryLedger
from projections.worker import ProjectionWorker

__all__ = ["create_app"]


def create_app(
    ledger: MemoryLedger, worker: ProjectionWorker | None = None, *, max_lag: int = 1000
) -> FastAPI:
    """The HTTP API over one ledger and the projections its worker maintains."""
    app = FastAPI(title="memledger", version="1", summary="An event-sourced memory ledger")
    app.state.ledger = ledger
    app.state.worker = worker

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """200 while the process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], response_model=None)
    def readyz() -> Any:
        """200 when the ledger is reachable and projections lag at most `max_lag` events."""
        try:
            position = ledger.position()
            lags = {s.name: s.lag for s in worker.status()} if worker else {}
        except Exception as error:  # any failure means not ready
            return JSONResponse(
                {"status": "unavailable", "detail": type(error).__name__}, status_code=503
            )
        body = {"ledger_position": position, "projection_lag": lags}
        if any(lag > max_lag for lag in lags.values()):
            return JSONResponse({"status": "lagging", **body}, status_code=503)
        return {"status": "ready", **body}

    return app
