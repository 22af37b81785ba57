"""Example values of the OpenAPI document, by component schema (or operationId) name.

Kept as data beside `api.openapi`, which puts them on every request body and main response
after FastAPI has built the document (FastAPI drops `None` values from examples that models
declare themselves; these keep their nulls). `tests/api/test_openapi.py` validates each one
against its schema, so an example cannot drift from the model it illustrates.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["OPERATION_EXAMPLES", "SCHEMA_EXAMPLES"]

_MEMORY_ID = "5f0c7a52-2a7e-4a0b-9c8e-3d1b0f6a2e11"
_CANDIDATE_ID = "9d3e1b7a-0c4f-4e2a-8b6d-1f5a7c9e3b02"

MEMORY: Final[dict[str, Any]] = {
    "memory_id": _MEMORY_ID,
    "memory_key": "explanation_preference",
    "content": "I prefer examples first.",
    "category": "preference",
    "scope_type": "workspace",
    "workspace_type": "learning",
    "source_type": "explicit",
    "status": "active",
    "revision": 1,
    "created_at": "2026-06-01T12:00:00Z",
    "updated_at": "2026-06-01T12:00:00Z",
    "last_confirmed_at": None,
    "review_after": None,
    "expires_at": None,
}

CANDIDATE: Final[dict[str, Any]] = {
    "candidate_id": _CANDIDATE_ID,
    "operation": "create",
    "target_memory_id": None,
    "expected_revision": None,
    "proposed_scope_type": "global",
    "proposed_workspace_type": None,
    "proposed_key": "answer_language",
    "proposed_content": "Answer in English unless I write in Chinese.",
    "proposed_category": "preference",
    "source_conversation_id": "conv-2026-06-01-17",
    "status": "pending",
    "resulting_memory_id": None,
    "created_at": "2026-06-01T12:05:00Z",
    "decided_at": None,
    "expires_at": "2026-07-01T12:05:00Z",
}

_AUDIT_EVENT: Final[dict[str, Any]] = {
    "position": 44037,
    "event_id": "0b6f2c1e-58a4-4d0e-9a51-3c1f0e7d9b20",
    "event_type": "memory.created",
    "memory_id": _MEMORY_ID,
    "user_id": "alice",
    "scope_type": "workspace",
    "workspace_type": "learning",
    "revision": 1,
    "content_hash": "hmac-sha256:6f1c0e…",
    "occurred_at": "2026-06-01T12:00:00Z",
    "request_id": "4c1d0e2f9a8b4c7d",
}

_VERSION: Final[dict[str, Any]] = {
    "revision": 1,
    "content": "I prefer examples first.",
    "category": "preference",
    "scope_type": "workspace",
    "workspace_type": "learning",
    "change_type": "create",
    "changed_via": "user_api",
    "source_candidate_id": None,
    "created_at": "2026-06-01T12:00:00Z",
}

_AS_OF_MEMORY: Final[dict[str, Any]] = {
    **MEMORY,
    "memory_key": None,
    "content": None,
    "revision": 2,
    "created_at": "2026-05-30T09:00:00+00:00",
    "updated_at": "2026-05-31T10:00:00+00:00",
    "redacted": True,
}

_FOUND: Final[dict[str, Any]] = {**MEMORY, "relevance": 0.92}

_CHANGE: Final[dict[str, Any]] = {
    "cursor": "WyJjMiIsNDMwMTNd",
    "event_type": "memory.updated",
    "memory_id": _MEMORY_ID,
    "candidate_id": None,
    "revision": 2,
    "occurred_at": "2026-06-01T12:10:00Z",
}

SCHEMA_EXAMPLES: Final[dict[str, Any]] = {
    "MemoryOut": MEMORY,
    "MemoryPage": {"items": [MEMORY], "next_cursor": None},
    "MemoryFound": _FOUND,
    "MemorySearchPage": {"items": [_FOUND], "next_cursor": "WyJxMSIsMC45MiwiNWYwYyJd"},
    "Change": _CHANGE,
    "ChangePage": {
        "items": [
            _CHANGE,
            {
                **_CHANGE,
                "cursor": "WyJjMiIsNDQwMzdd",
                "event_type": "memory.deleted",
                "occurred_at": "2026-06-01T12:11:00Z",
            },
        ],
        "next_after": "WyJjMiIsNDQwMzdd",
    },
    "VersionOut": _VERSION,
    "VersionList": {
        "items": [
            _VERSION,
            {**_VERSION, "revision": 2, "content": "Examples first.", "change_type": "update"},
        ]
    },
    "VersionRestore": {"expected_revision": 2},
    "Candidate": CANDIDATE,
    "CandidateList": {"items": [CANDIDATE]},
    "CandidateAccepted": {
        "candidate": {
            **CANDIDATE,
            "status": "accepted",
            "resulting_memory_id": _MEMORY_ID,
            "decided_at": "2026-06-01T12:06:00Z",
        },
        "memory": {**MEMORY, "source_type": "confirmed"},
    },
    "CandidateAccept": {"content": "Answer in English unless I write in Chinese or French."},
    "SettingsOut": {"saved_memory_enabled": True, "auto_extract_enabled": True},
    "SearchBody": {"query": "how should examples be explained", "limit": 5},
    "SearchHit": {
        **{k: MEMORY[k] for k in ("memory_id", "memory_key", "content", "category")},
        **{k: MEMORY[k] for k in ("scope_type", "workspace_type", "source_type", "updated_at")},
        "tokens": 7,
        "relevance": 0.92,
    },
    "ListBody": {"scope_type": "workspace"},
    "SaveBody": {
        "memory_key": "explanation_preference",
        "content": "I prefer examples first.",
        "category": "preference",
        "scope_type": "workspace",
    },
    "SaveResult": {"status": "created", "memory": MEMORY, "candidate": None},
    "UpdateBody": {"memory_id": _MEMORY_ID, "content": "Examples first, then the rule."},
    "UpdateResult": {"status": "updated", "memory": {**MEMORY, "revision": 2}},
    "ForgetBody": {"memory_id": _MEMORY_ID},
    "ForgetResult": {"status": "forgotten"},
    "ProposeBody": {
        "memory_key": "answer_language",
        "content": "Answer in English unless I write in Chinese.",
        "category": "preference",
        "scope_type": "global",
        "source_conversation_id": "conv-2026-06-01-17",
    },
    "ProposeResult": {"status": "candidate_created", "candidate": CANDIDATE},
    "ToolSpec": {
        "name": "forget_core_memory",
        "description": "Forget one memory irrecoverably.",
        "input_schema": {
            "type": "object",
            "properties": {"memory_id": {"type": "string", "format": "uuid"}},
            "required": ["memory_id"],
            "additionalProperties": False,
        },
    },
    "AuditEvent": _AUDIT_EVENT,
    "AuditPage": {"items": [_AUDIT_EVENT], "next_after": "WyJhMiIsWzUsNDNdLFsxNyw5XV0"},
    "AsOfMemory": _AS_OF_MEMORY,
    "AsOfView": {
        "user_id": "alice",
        "as_of": "2026-06-01T12:00:00+00:00",
        "items": [_AS_OF_MEMORY],
    },
}
"""Examples of component schemas; every body or response that is one of them shows it."""

_SEARCH_RESULT = {"items": [SCHEMA_EXAMPLES["SearchHit"]], "total_tokens": 7}
SCHEMA_EXAMPLES["SearchResultOut"] = _SEARCH_RESULT
SCHEMA_EXAMPLES["ListResult"] = {"items": [MEMORY]}

OPERATION_EXAMPLES: Final[dict[str, dict[str, Any]]] = {
    "listLegacyMemories": {
        "application/json": [
            {"memory_key": "language", "content": "Answer in Python", "category": "preference"}
        ]
    },
    "listTools": {"application/json": [SCHEMA_EXAMPLES["ToolSpec"]]},
    "getHealth": {"application/json": {"status": "ok"}},
    "listMemories": {"application/json": SCHEMA_EXAMPLES["MemorySearchPage"]},
    "listChanges": {
        "text/event-stream": (
            ": ping - 2026-06-01 12:10:00+00:00\r\n\r\n"
            "id: WyJjMiIsNDMwMTNd\r\nevent: memory.updated\r\n"
            f"data: {json.dumps(_CHANGE, separators=(',', ':'))}\r\n\r\n"
        )
    },
    "getReadiness": {
        "application/json": {
            "status": "ready",
            "ledger_position": 1024,
            "projection_lag": {"memories": 0, "audit_log": 0},
            "degraded": False,
            "search": "hybrid",
            "embeddings": {"status": "ok", "model": "multilingual-e5-small", "detail": None},
            "reranker": {"status": "off", "model": None, "detail": None},
        }
    },
    "getMetrics": {
        "text/plain": (
            "# HELP memledger_http_requests_total HTTP requests\n"
            "# TYPE memledger_http_requests_total counter\n"
            'memledger_http_requests_total{method="GET",route="/me/core-memories",'
            'status="200"} 3.0\n'
        )
    },
}
"""Examples of 2xx responses that are no component schema, by operationId and media type."""
