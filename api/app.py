"""The FastAPI application: built once from a ready ledger (routes are added by resource)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from domain.ledger.ledger import MemoryLedger

__all__ = ["create_app"]


def create_app(ledger: MemoryLedger) -> FastAPI:
    """The HTTP API over one ledger."""
    app = FastAPI(title="memledger", version="1", summary="An event-sourced memory ledger")
    app.state.ledger = ledger

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """200 while the process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], response_model=None)
    def readyz() -> Any:
        """200 when the ledger is reachable, else 503."""
        try:
            position = ledger.position()
        except Exception as error:
            return JSONResponse(
                {"status": "unavailable", "detail": type(error).__name__}, status_code=503
            )
        return {"status": "ready", "ledger_position": position}

    return app
