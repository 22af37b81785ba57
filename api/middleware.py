"""ASGI middleware: request ids, structured access logs, latency metrics, a last-resort 500,
the request body limit, and admission (the process's concurrency and connection limits)."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.metrics import Metrics
from domain.context import correlated
from domain.ledger.positions import token as position_token

__all__ = [
    "OVER_CAPACITY",
    "Admission",
    "BodyLimit",
    "BodyTooLarge",
    "JsonFormatter",
    "RequestContext",
    "WritePosition",
    "configure_logging",
    "note_position",
]

_log = logging.getLogger("memledger.access")
_api_log = logging.getLogger("memledger.api")
_VALID_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
OVER_CAPACITY: Final = "memledger.over_connection_limit"
"""Key of the ASGI state of a request on a connection opened past the connection limit
(set by api/http_protocol.py)."""


class JsonFormatter(logging.Formatter):
    """One JSON object per log line, with every `extra` field (request_id, user_id, memory_ids).

    Callers must never pass memory content as a field: logs carry ids, scopes and reasons only.
    """

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
        "message",
        "asctime",
        "taskName",
        "color_message",  # uvicorn's copy of the message with ANSI colour codes
    }

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in self._STANDARD})
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = type(record.exc_info[1]).__name__  # no message, no locals: no content
        return json.dumps(line, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send every log record to stderr as one JSON object per line."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # RequestContext logs each request


class RequestContext:
    """Gives every request an id (X-Request-ID, taken from the caller when well-formed).

    The id is set for the domain (so events and logs carry it) and echoed on every response,
    500s included: an unexpected error is answered here with the id and nothing else.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _VALID_ID.fullmatch(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = {"code": 500, "started": False}
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        with correlated(request_id):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                _log.exception("unexpected error", extra={"request_id": request_id})
                if not status["started"]:
                    body = json.dumps({"detail": "internal error", "request_id": request_id})
                    await send_with_id(
                        {
                            "type": "http.response.start",
                            "status": 500,
                            "headers": [(b"content-type", b"application/json")],
                        }
                    )
                    await send({"type": "http.response.body", "body": body.encode()})
            finally:
                self._record(scope, request_id, int(status["code"]), started)

    def _record(self, scope: Scope, request_id: str, status: int, started: float) -> None:
        elapsed = time.perf_counter() - started
        route = getattr(scope.get("route"), "path", "unmatched")
        method = scope.get("method", "")
        self.metrics.requests.labels(route, method, str(status)).inc()
        self.metrics.latency.labels(route, method, str(status)).observe(elapsed)
        state = scope.get("state", {})
        memory_id = (scope.get("path_params") or {}).get("memory_id")
        _log.info(
            "request",
            extra={
                "request_id": request_id,
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 2),
                "user_id": state.get("user_id"),
                "memory_ids": state.get("memory_ids") or ([str(memory_id)] if memory_id else None),
            },
        )


class BodyTooLarge(HTTPException):
    """The request body passed the limit while it was read (answered 413 by api/errors.py)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the limit of {limit} bytes")


class BodyLimit:
    """Refuses request bodies over `limit` bytes with 413, without ever holding more.

    A declared Content-Length over the limit is answered before any byte is read; a body
    streamed without one is counted as the application pulls it and refused (BodyTooLarge,
    raised from `receive`) once it passes the limit. FastAPI's own `max_body_size` answers the
    first case in plain text, not in the contract's error shape, hence this.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            too_large = BodyTooLarge(self.limit)
            response = JSONResponse({"detail": too_large.detail}, status_code=413)
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


class Admission:
    """At most `limit` HTTP requests in flight in the process (0: no cap); 503 past it.

    A request arriving while `limit` are being served is answered at once, 503 with Retry-After
    in the contract's error shape (uvicorn's own `limit_concurrency` answers in plain text
    without Retry-After, hence this), and so is every request of a connection opened past the
    connection limit (api/http_protocol.py marks it), which is then closed. `/healthz` is always
    answered: it does nothing, and a process at its limit is busy, not dead.
    """

    def __init__(self, app: ASGIApp, limit: int, retry_after: int) -> None:
        self.app = app
        self.limit = limit
        self.retry_after = retry_after
        self.in_flight = 0  # the event loop's thread only: no lock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") == "/healthz":
            await self.app(scope, receive, send)
            return
        if (scope.get("state") or {}).get(OVER_CAPACITY):
            await self._refuse(scope, receive, send, "connection", close=True)
            return
        if self.limit and self.in_flight >= self.limit:
            await self._refuse(scope, receive, send, "concurrency", close=False)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, limit: str, *, close: bool
    ) -> None:
        _api_log.warning(
            "503: at the %s limit",
            limit,
            extra={"path": scope.get("path"), "method": scope.get("method")},
        )
        headers = {"Retry-After": str(self.retry_after)}
        if close:
            headers["Connection"] = "close"
        response = JSONResponse(
            {"detail": f"the service is at its {limit} limit; retry"},
            status_code=503,
            headers=headers,
        )
        await response(scope, receive, send)


_POSITIONS: ContextVar[list[int] | None] = ContextVar("memledger_write_positions", default=None)


def note_position(position: int) -> None:
    """Record a ledger position the current request's answer reflects (its `X-Position`)."""
    positions = _POSITIONS.get()
    if positions is not None:
        positions.append(position)


class WritePosition:
    """Answers `X-Position` on every successful request that wrote (API_CONTRACT.md).

    The request gets a list of its own, which the thread running the route shares (the
    thread pool copies the context, not the list); every write notes its ledger position in
    it (`Services.wrote`, which notes the ledger head for a write that appended nothing), and
    the largest is the header: a later `X-Min-Position` with it reads state at least as new.
    The value is the position's opaque token (domain/ledger/positions.py). A request's
    writes are all its caller's, in one partition: the largest is the latest.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        positions: list[int] = []

        async def send_with_position(message: Message) -> None:
            start = message["type"] == "http.response.start"
            if start and positions and 200 <= message["status"] < 300:
                value = position_token(max(positions)).encode()
                headers = [*message.get("headers", []), (b"x-position", value)]
                message = {**message, "headers": headers}
            await send(message)

        token = _POSITIONS.set(positions)
        try:
            await self.app(scope, receive, send_with_position)
        finally:
            _POSITIONS.reset(token)
