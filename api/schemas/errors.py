"""The one error body every non-2xx answer has (API_CONTRACT.md, 'Shapes')."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict

__all__ = ["ERROR_RESPONSES", "ErrorBody"]


class ErrorBody(BaseModel):
    """`detail` is always a human-readable string; `reason` a fixed string where listed."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "detail": "revision conflict: current revision is 3",
                    "reason": "revision_conflict",
                    "current_revision": 3,
                },
            ]
        },
    )
    detail: str
    reason: str | None = None
    errors: list[dict[str, Any]] | None = None
    current_revision: int | None = None
    memory_id: str | None = None
    request_id: str | None = None


_BODY: Final = "#/components/schemas/ErrorBody"


def _error(description: str) -> dict[str, Any]:
    # The body as a reference, not `"model": ErrorBody`: FastAPI makes a model field of every
    # route's every `model` response when an app is built (the document is all they serve),
    # which doubled the cost of building the app; api/openapi.py adds the ErrorBody schema.
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _BODY}}},
    }


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _error("missing, malformed, expired or wrongly signed token"),
    403: _error("policy denies the call (reason says which)"),
    404: _error("not found, or another user's"),
    409: _error("revision_conflict (with current_revision) or key_exists (with memory_id)"),
    410: _error("the memory was forgotten (reason: forgotten)"),
    413: _error("the request body is over the limit (MEMLEDGER_MAX_BODY_BYTES)"),
    422: _error("invalid input; reason sensitive_content for secrets"),
    429: _error(
        "the caller (token sub) has as many requests in flight as the per-user limit allows"
        " (MEMLEDGER_USER_CONCURRENCY, MEMLEDGER_USER_SEARCH_CONCURRENCY); retry after"
        " Retry-After seconds"
    ),
    500: _error("unexpected error: only the request id is returned"),
    503: _error(
        "the ledger or projections are unavailable, or the service is at its connection or"
        " concurrency limit; retry after Retry-After seconds"
    ),
}
