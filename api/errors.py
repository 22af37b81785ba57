"""Every domain error mapped to its HTTP status in one place (API_CONTRACT.md, 'Shapes')."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from api.limits import UserBusy
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

__all__ = ["install_error_handlers", "too_many", "unavailable"]

_log = logging.getLogger("memledger.api")


def _error(code: int, detail: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return JSONResponse({"detail": detail, **extra}, status_code=code, headers=headers)


_CONFLICTS: dict[type, str] = {
    KeyExists: "key_exists",
    RevisionConflict: "revision_conflict",
    CandidateNotPending: "candidate_decided",
}


def _field_errors(error: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"),
            "message": e.get("msg", "invalid"),
            "type": e.get("type", ""),
        }
        for e in error.errors()
    ]


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


def unavailable(
    retry_after: int, detail: str = "the ledger is busy or unreachable; retry"
) -> JSONResponse:
    """503: the ledger or a projection is unreachable or busy, or (`detail` says so) the
    request's deadline passed (api/deadline.py); the client may retry after `retry_after`
    seconds."""
    return JSONResponse(
        {"detail": detail},
        status_code=503,
        headers={"Retry-After": str(retry_after)},
    )


def too_many(error: UserBusy, retry_after: int) -> JSONResponse:
    """429: the caller (token `sub`) is at a per-user limit (api/limits.py)."""
    return JSONResponse(
        {"detail": str(error)}, status_code=429, headers={"Retry-After": str(retry_after)}
    )


def _status_of(error: Exception, retry_after: int) -> JSONResponse:
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
            return JSONResponse(
                {
                    "detail": "the server cannot open a data key: it lacks a master key after a"
                    " key rotation; retry later",
                    "reason": "master_key_missing",
                },
                status_code=503,
                headers={"Retry-After": str(retry_after)},
            )
        case LedgerUnavailable():
            return unavailable(retry_after)
        case UserBusy():
            return too_many(error, retry_after)
    raise error


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers; unexpected errors become 500 with a request id, nothing more."""

    async def domain_error(request: Request, error: Exception) -> JSONResponse:
        services = request.app.state.services
        conflict = _CONFLICTS.get(type(error))
        if conflict is not None:  # section 17: the conflict rate, by reason
            services.metrics.conflicts.labels(conflict).inc()
        if isinstance(error, UserBusy):
            services.metrics.limited.labels(error.kind).inc()
        return _status_of(error, services.retry_after)

    async def validation_error(_: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        errors = _field_errors(error)
        summary = "; ".join(f"{e['field'] or 'body'}: {e['message']}" for e in errors)
        return _error(422, f"invalid request: {summary}", errors=errors)

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
            )
        if error.status_code == 405:  # every method of the path, not only one route's
            headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(request))}
        return JSONResponse(
            {"detail": str(error.detail)}, status_code=error.status_code, headers=headers
        )

    async def unexpected(_: Request, error: Exception) -> JSONResponse:
        request_id = current_request_id()
        _log.error("unexpected error", exc_info=error, extra={"request_id": request_id})
        return _error(500, "internal error", request_id=request_id)

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
    ):
        app.add_exception_handler(kind, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
