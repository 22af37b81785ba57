"""Every domain error mapped to its HTTP status in one place (API_CONTRACT.md, 'Shapes')."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from eventsourcing import persistence
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from api.limits import UserBusy
from api.services import Services
from api.tokens import InvalidToken
from domain.context import current_request_id
from domain.errors import (
    CandidateNotPending,
    InvalidInput,
    KeyExists,
    LedgerUnavailable,
    MasterKeyMissing,
    MemoryForgotten,
    NotFound,
    PolicyDenied,
    RevisionConflict,
    SensitiveContent,
)
from projections.reads import InvalidCursor

__all__ = [
    "ErrorAnswer",
    "error_answer",
    "install_error_handlers",
    "invalid_request",
    "too_many",
    "unavailable",
]

_log = logging.getLogger("memledger.api")
_BUSY = "the ledger is busy or unreachable; retry"


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """An error as the contract answers it: a status, the body (`detail`, `reason`, ...) and
    headers (Retry-After, WWW-Authenticate); HTTP sends it as is, MCP as a tool error."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None

    def response(self) -> JSONResponse:
        """As an HTTP response."""
        return JSONResponse(self.body, status_code=self.status, headers=self.headers)


def _error(code: int, detail: str, **extra: Any) -> ErrorAnswer:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return ErrorAnswer(code, {"detail": detail, **extra}, headers)


_CONFLICTS: dict[type, str] = {
    KeyExists: "key_exists",
    RevisionConflict: "revision_conflict",
    CandidateNotPending: "candidate_decided",
}


_OUTAGES: tuple[type[Exception], ...] = (
    persistence.OperationalError,
    persistence.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
"""The drivers' and the ledger library's outage errors (connection lost, server shutting down,
pool or statement timeout): 503 like LedgerUnavailable wherever they surface."""


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> ErrorAnswer:
    """422 for pydantic's validation errors (of a body, a header, a tool's arguments)."""
    fields = [
        {
            "field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"),
            "message": e.get("msg", "invalid"),
            "type": e.get("type", ""),
        }
        for e in errors
    ]
    summary = "; ".join(f"{e['field'] or 'body'}: {e['message']}" for e in fields)
    return _error(422, f"invalid request: {summary}", errors=fields)


def _allowed_methods(request: Request) -> list[str]:
    """The methods of every route whose path matches the request's (Allow of a 405).

    Starlette answers with the methods of the first route matching the path only, and several
    routes share most paths here (GET, PATCH and DELETE of one memory).
    """
    allowed: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        if route.methods and compile_path(route.path)[0].fullmatch(request.url.path):
            allowed |= route.methods
    return sorted(allowed)


def unavailable(retry_after: int, detail: str = _BUSY) -> JSONResponse:
    """503: the ledger or a projection is unreachable or busy, or (`detail` says so) the
    request's deadline passed (api/deadline.py); the client may retry after `retry_after`
    seconds."""
    return _retry_later(503, detail, retry_after).response()


def too_many(error: UserBusy, retry_after: int) -> JSONResponse:
    """429: the caller (token `sub`) is at a per-user limit (api/limits.py)."""
    return _retry_later(429, str(error), retry_after).response()


def _status_of(error: Exception, retry_after: int) -> ErrorAnswer:
    match error:
        case InvalidToken():
            return _error(401, "missing, malformed, expired or wrongly signed bearer token")
        case SensitiveContent():
            return _error(
                422,
                str(error),
                reason="sensitive_content",
                errors=[{"field": error.field, "message": error.message}],
            )
        case InvalidInput():
            return _error(
                422, str(error), errors=[{"field": error.field, "message": error.message}]
            )
        case InvalidCursor():
            return _error(422, str(error), errors=[{"field": "cursor", "message": str(error)}])
        case PolicyDenied():
            return _error(403, str(error), reason=error.reason)
        case NotFound():
            return _error(404, "not found")
        case MemoryForgotten():
            return _error(
                410, "this memory was forgotten; its content is gone for good", reason="forgotten"
            )
        case RevisionConflict():
            return _error(
                409, str(error), reason="revision_conflict", current_revision=error.current_revision
            )
        case KeyExists():
            return _error(409, str(error), reason="key_exists", memory_id=str(error.memory_id))
        case CandidateNotPending():
            return _error(409, str(error), reason="candidate_decided", status=error.status)
        case MasterKeyMissing():
            # Not the client's fault nor a bug: this server missed a key rotation (logged once
            # per request with the key's id; the client is told no more than that).
            _log.error("%s", error, extra={"request_id": current_request_id()})
            return ErrorAnswer(
                503,
                {
                    "detail": "the server cannot open a data key: it lacks a master key after a"
                    " key rotation; retry later",
                    "reason": "master_key_missing",
                },
                {"Retry-After": str(retry_after)},
            )
        case LedgerUnavailable():
            return _retry_later(503, _BUSY, retry_after)
        case (
            persistence.OperationalError()
            | persistence.InterfaceError()
            | psycopg.OperationalError()
            | psycopg.InterfaceError()
        ):  # an outage no layer below named LedgerUnavailable: still not a bug
            _log.warning("database outage: %s", type(error).__name__)
            return _retry_later(503, _BUSY, retry_after)
        case UserBusy():
            return _retry_later(429, str(error), retry_after)
    raise error


def _retry_later(status: int, detail: str, retry_after: int) -> ErrorAnswer:
    return ErrorAnswer(status, {"detail": detail}, {"Retry-After": str(retry_after)})


def error_answer(error: Exception, services: Services) -> ErrorAnswer:
    """A domain error (or InvalidToken, InvalidCursor, UserBusy) as the contract answers it,
    counted in the metrics (conflicts by reason, per-user limits); any other error: raised."""
    conflict = _CONFLICTS.get(type(error))
    if conflict is not None:  # section 17: the conflict rate, by reason
        services.metrics.conflicts.labels(conflict).inc()
    if isinstance(error, UserBusy):
        services.metrics.limited.labels(error.kind).inc()
    return _status_of(error, services.retry_after)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers; unexpected errors become 500 with a request id, nothing more."""

    async def domain_error(request: Request, error: Exception) -> JSONResponse:
        return error_answer(error, request.app.state.services).response()

    async def validation_error(_: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return invalid_request(error.errors()).response()

    async def http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, HTTPException)
        headers = error.headers
        if error.status_code == 400 and isinstance(error.__cause__, ValueError | RecursionError):
            # FastAPI could not parse the body: invalid UTF-8, or JSON nested too deep.
            message = "the body is not JSON in UTF-8 (or is nested too deep)"
            return _error(
                422,
                f"invalid request: {message}",
                errors=[{"field": "body", "message": message, "type": "json_invalid"}],
            ).response()
        if error.status_code == 405:  # every method of the path, not only one route's
            headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(request))}
        return JSONResponse(
            {"detail": str(error.detail)}, status_code=error.status_code, headers=headers
        )

    async def unexpected(_: Request, error: Exception) -> JSONResponse:
        request_id = current_request_id()
        _log.error("unexpected error", exc_info=error, extra={"request_id": request_id})
        return _error(500, "internal error", request_id=request_id).response()

    for kind in (
        InvalidToken,
        InvalidInput,
        InvalidCursor,
        PolicyDenied,
        NotFound,
        MemoryForgotten,
        RevisionConflict,
        KeyExists,
        CandidateNotPending,
        LedgerUnavailable,
        UserBusy,
        *_OUTAGES,
    ):
        app.add_exception_handler(kind, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
