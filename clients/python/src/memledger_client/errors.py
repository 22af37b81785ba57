"""Exceptions: one class per kind of answer the contract gives, each carrying its `reason`.

MemLedgerError
├── TransportFailed              no answer: connection refused, reset, timed out
└── APIError                     an answer with a status >= 400 (status, detail, reason)
    ├── Unauthorized             401
    ├── Forbidden                403 (reason: isolated_mode, no_write_mode, agent_token, …)
    ├── NotFound                 404 (or another user's)
    ├── Forgotten                410 (reason: forgotten)
    ├── Conflict                 409
    │   ├── RevisionConflict     reason revision_conflict, `current_revision`
    │   ├── KeyExists            reason key_exists, `memory_id`
    │   └── CandidateDecided     reason candidate_decided, `candidate_status`
    ├── PayloadTooLarge          413
    ├── ValidationError          422 (`errors`: the fields at fault)
    │   └── SensitiveContent     reason sensitive_content
    ├── RateLimited              429, `retry_after`
    ├── Unavailable              503, `retry_after`
    └── ServerError              any other 5xx
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2

__all__ = [
    "APIError",
    "CandidateDecided",
    "Conflict",
    "Forbidden",
    "Forgotten",
    "KeyExists",
    "MemLedgerError",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RevisionConflict",
    "SensitiveContent",
    "ServerError",
    "TransportFailed",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
    "error_for",
    "retry_after_seconds",
]


class MemLedgerError(Exception):
    """Anything this client raises about a call."""


class TransportFailed(MemLedgerError):
    """No answer from the server (after the retries the call allowed); `__cause__` says why."""


class APIError(MemLedgerError):
    """The server answered with an error status: `status`, `detail`, `reason` (or None)."""

    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        self.status: int = response.status_code
        self.detail: str = str(body.get("detail") or response.reason_phrase)
        self.reason: str | None = body.get("reason")
        self.body: dict[str, Any] = body
        self.request_id: str | None = body.get("request_id") or response.headers.get("X-Request-ID")
        super().__init__(" ".join(filter(None, [str(self.status), self.reason, self.detail])))


class Unauthorized(APIError):
    """401: the token is missing, malformed, expired or wrongly signed."""


class Forbidden(APIError):
    """403: policy denies the call; `reason` says which policy."""


class NotFound(APIError):
    """404: no such thing, or another user's (the server never says which)."""


class Forgotten(APIError):
    """410: the memory was forgotten; its content is gone for good."""


class Conflict(APIError):
    """409: the call lost a race or would break a uniqueness rule."""


class RevisionConflict(Conflict):
    """409 `revision_conflict`: `current_revision` is the memory's revision now."""

    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        super().__init__(response, body)
        self.current_revision: int | None = body.get("current_revision")


class KeyExists(Conflict):
    """409 `key_exists`: another memory (`memory_id`) holds this key and scope."""

    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        super().__init__(response, body)
        self.memory_id: str | None = body.get("memory_id")


class CandidateDecided(Conflict):
    """409 `candidate_decided`: the candidate is no longer pending (`candidate_status`)."""

    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        super().__init__(response, body)
        self.candidate_status: str | None = body.get("status")


class PayloadTooLarge(APIError):
    """413: the request body is over the server's limit."""


class ValidationError(APIError):
    """422: invalid input; `errors` lists the fields at fault (`field`, `message`)."""

    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        super().__init__(response, body)
        self.errors: list[dict[str, Any]] = list(body.get("errors") or [])


class SensitiveContent(ValidationError):
    """422 `sensitive_content`: the text looks like a secret or a credential."""


class _RetryLater(APIError):
    def __init__(self, response: httpx2.Response, body: dict[str, Any]) -> None:
        super().__init__(response, body)
        self.retry_after: float | None = retry_after_seconds(response)
        """Seconds the server asked to wait (Retry-After), if it said."""


class RateLimited(_RetryLater):
    """429: the caller has too many requests in flight; retry after `retry_after` seconds."""


class Unavailable(_RetryLater):
    """503: the ledger or a projection is unavailable or busy; retry after `retry_after`."""


class ServerError(APIError):
    """Any other 5xx: a bug on the server; `request_id` helps its operator find it."""


_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Forgotten,
    413: PayloadTooLarge,
    422: ValidationError,
    429: RateLimited,
    503: Unavailable,
}
_BY_REASON: dict[str, type[APIError]] = {
    "revision_conflict": RevisionConflict,
    "key_exists": KeyExists,
    "candidate_decided": CandidateDecided,
    "sensitive_content": SensitiveContent,
}


def error_for(response: httpx2.Response) -> APIError:
    """The exception for an error answer (the body must have been read)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"detail": response.text[:500] or response.reason_phrase}
    kind = _BY_REASON.get(str(body.get("reason")))
    if kind is None or not issubclass(kind, _BY_STATUS.get(response.status_code, APIError)):
        kind = _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else APIError
    return kind(response, body)


def retry_after_seconds(response: httpx2.Response) -> float | None:
    """`Retry-After` in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
