"""Agent-turn tokens stay in the agent tools (issue 13, point 8; API_CONTRACT.md 'Identity').

A token with mode no_write or isolated, or with a tools list, is one agent turn's: on /me/* and
/audit/* it gets 403 `agent_token`, after identity (401) and request validation (422), so a
mode can never be widened through the management API. User tokens keep working there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

Auth = Callable[..., dict[str, str]]
MISSING = "00000000-0000-4000-8000-000000000000"
MEMORY = {
    "memory_key": "drink",
    "content": "I like green tea",
    "category": "preference",
    "scope_type": "global",
}
LEGACY = {"memory_key": "drink", "content": "I like green tea", "category": "preference"}

# Every endpoint of /me/* and /audit/*, each with a valid request.
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/me/core-memories", None),
    ("POST", "/me/core-memories", MEMORY),
    ("GET", f"/me/core-memories/{MISSING}", None),
    ("PATCH", f"/me/core-memories/{MISSING}", {"expected_revision": 1, "content": "Tea"}),
    ("DELETE", f"/me/core-memories/{MISSING}", None),
    ("POST", f"/me/core-memories/{MISSING}/suppress", None),
    ("POST", f"/me/core-memories/{MISSING}/restore", None),
    ("GET", f"/me/core-memories/{MISSING}/versions", None),
    ("POST", f"/me/core-memories/{MISSING}/versions/1/restore", {"expected_revision": 1}),
    ("GET", "/me/memories", None),
    ("PUT", "/me/memories", LEGACY),
    ("DELETE", "/me/memories/drink", None),
    ("GET", "/me/memory-candidates", None),
    ("POST", f"/me/memory-candidates/{MISSING}/accept", {}),
    ("POST", f"/me/memory-candidates/{MISSING}/reject", None),
    ("GET", "/me/memory-settings", None),
    ("PATCH", "/me/memory-settings", {"saved_memory_enabled": False}),
    ("GET", "/audit/events", None),
]
AGENT_CLAIMS: list[dict[str, Any]] = [
    {"mode": "isolated", "workspace": "learning"},
    {"mode": "no_write", "workspace": "learning"},
    {"mode": "no_write"},
    {"tools": ["search_core_memories"], "workspace": "learning"},
    {"tools": []},
    {"mode": "normal", "tools": ["list_core_memories"]},
]


def request(client: TestClient, headers: dict[str, str], method: str, path: str, body: Any) -> Any:
    return client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_every_agent_turn_token_is_refused_on_the_user_apis(
    client: TestClient, auth: Auth, method: str, path: str, body: Any
) -> None:
    for claims in AGENT_CLAIMS:
        headers = auth("alice", roles=["auditor"], **claims)
        response = request(client, headers, method, path, body)
        assert response.status_code == 403, (claims, response.text)
        assert response.json()["reason"] == "agent_token"
        assert isinstance(response.json()["detail"], str)


def test_an_isolated_token_cannot_list_or_switch_settings(client: TestClient, auth: Auth) -> None:
    """The issue's reproduction: nothing is listed and the settings stay as they were."""
    user = auth("alice")
    assert client.post("/me/core-memories", json=MEMORY, headers=user).status_code == 201
    isolated = auth("alice", workspace="learning", mode="isolated")

    assert client.get("/me/core-memories", headers=isolated).status_code == 403
    switched = client.patch(
        "/me/memory-settings", json={"saved_memory_enabled": True}, headers=isolated
    )
    assert switched.status_code == 403
    assert client.get("/me/memory-settings", headers=user).json()["saved_memory_enabled"] is True


def test_the_check_order_is_identity_then_validation_then_agent_token(
    client: TestClient, auth: Auth
) -> None:
    agent = auth("alice", mode="isolated")
    bad_body = {**MEMORY, "content": "tea\x00"}

    assert client.post("/me/core-memories", json=bad_body).status_code == 401
    assert client.post("/me/core-memories", json=bad_body, headers=agent).status_code == 422
    assert client.get("/me/core-memories?limit=500", headers=agent).status_code == 422
    assert client.post("/me/core-memories", json=MEMORY, headers=agent).status_code == 403


def test_an_agent_auditor_is_refused_before_the_auditor_check(
    client: TestClient, auth: Auth
) -> None:
    response = client.get("/audit/events", headers=auth("audrey", tools=[]))
    assert response.json()["reason"] == "agent_token"


@pytest.mark.parametrize(
    "claims",
    [
        {},
        {"workspace": "learning"},
        {"mode": "normal"},
        {"mode": "normal", "workspace": "teaching"},
    ],
)
def test_user_tokens_keep_working_with_or_without_a_workspace(
    client: TestClient, auth: Auth, claims: dict[str, Any]
) -> None:
    headers = auth("alice", roles=["auditor"], **claims)

    assert client.post("/me/core-memories", json=MEMORY, headers=headers).status_code in (200, 201)
    assert client.get("/me/core-memories", headers=headers).status_code == 200
    assert client.get("/me/memories", headers=headers).status_code == 200
    assert client.get("/me/memory-candidates", headers=headers).status_code == 200
    assert client.get("/me/memory-settings", headers=headers).status_code == 200
    assert client.get("/audit/events", headers=headers).status_code == 200


def test_agent_turn_tokens_still_reach_the_tools(client: TestClient, auth: Auth) -> None:
    listing = auth("alice", workspace="learning", tools=["list_core_memories"])
    response = client.post("/tools/list_core_memories", json={}, headers=listing)
    assert response.status_code == 200
    assert client.get("/tools", headers=auth("alice", mode="isolated")).status_code == 200
