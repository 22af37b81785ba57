"""The management and legacy memory APIs over HTTP, status by status (API_CONTRACT.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.tokens import mint_token

Auth = Callable[..., dict[str, str]]
JWT_SECRET = "test-secret-of-at-least-32-bytes-long!"  # as in tests/conftest.py
BASE = "/me/core-memories"


def create(client: TestClient, auth: Auth, **fields: Any) -> Any:
    body = {
        "memory_key": "style",
        "content": "I prefer examples first",
        "category": "preference",
        "scope_type": "global",
    } | fields
    return client.post(BASE, json=body, headers=auth())


def test_create_then_read_it_back(client: TestClient, auth: Auth) -> None:
    created = create(client, auth, scope_type="workspace", workspace_type="learning")
    assert created.status_code == 201
    memory = created.json()
    assert memory["revision"] == 1 and memory["source_type"] == "explicit"
    assert memory["workspace_type"] == "learning" and memory["status"] == "active"
    fetched = client.get(f"{BASE}/{memory['memory_id']}", headers=auth())
    assert fetched.status_code == 200 and fetched.json() == memory
    listed = client.get(BASE, headers=auth()).json()
    assert [m["memory_id"] for m in listed["items"]] == [memory["memory_id"]]
    assert listed["next_cursor"] is None


def test_the_same_content_again_is_200_unchanged(client: TestClient, auth: Auth) -> None:
    first = create(client, auth).json()
    again = create(client, auth, content="  i prefer EXAMPLES first. ")
    assert again.status_code == 200 and again.json()["memory_id"] == first["memory_id"]
    assert again.json()["revision"] == 1


def test_a_different_value_for_the_key_is_409_key_exists(client: TestClient, auth: Auth) -> None:
    first = create(client, auth).json()
    conflict = create(client, auth, content="Definitions first")
    assert conflict.status_code == 409
    assert conflict.json()["reason"] == "key_exists"
    assert conflict.json()["memory_id"] == first["memory_id"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scope_type": "global", "workspace_type": "learning"}, "workspace_type"),
        ({"scope_type": "workspace"}, "workspace_type"),
        ({"scope_type": "project"}, "scope_type"),
        ({"category": "secret"}, "category"),
        ({"memory_key": "!!!"}, "memory_key"),
        ({"expires_at": "2000-01-01T00:00:00Z"}, "expires_at"),
        ({"user_id": "mallory"}, "user_id"),
    ],
)
def test_invalid_input_is_422_with_a_string_detail(
    client: TestClient, auth: Auth, fields: dict[str, Any], field: str
) -> None:
    response = create(client, auth, **fields)
    assert response.status_code == 422
    body = response.json()
    assert isinstance(body["detail"], str) and field in body["detail"]
    assert any(field in e["field"] for e in body["errors"])


def test_secrets_are_422_sensitive_content(client: TestClient, auth: Auth) -> None:
    response = create(
        client, auth, content="my api key is sk-proj-4fJ9kLmN2pQ8rS7tU6vW5xY3zA1bC0dE9fG8hI7j"
    )
    assert response.status_code == 422 and response.json()["reason"] == "sensitive_content"


def test_patch_needs_expected_revision_and_detects_stale_ones(
    client: TestClient, auth: Auth
) -> None:
    memory = create(client, auth).json()
    url = f"{BASE}/{memory['memory_id']}"
    assert client.patch(url, json={"content": "x"}, headers=auth()).status_code == 422
    updated = client.patch(
        url, json={"expected_revision": 1, "content": "Examples, then rules"}, headers=auth()
    )
    assert updated.status_code == 200 and updated.json()["revision"] == 2
    stale = client.patch(url, json={"expected_revision": 1, "content": "again"}, headers=auth())
    assert stale.status_code == 409
    assert stale.json() | {"detail": ""} == {
        "detail": "",
        "reason": "revision_conflict",
        "current_revision": 2,
    }


def test_review_date_change_keeps_the_revision(client: TestClient, auth: Auth) -> None:
    memory = create(client, auth).json()
    response = client.patch(
        f"{BASE}/{memory['memory_id']}",
        headers=auth(),
        json={"expected_revision": 1, "review_after": "2030-01-01T00:00:00Z"},
    )
    assert response.status_code == 200
    assert response.json()["revision"] == 1 and response.json()["review_after"].startswith("2030")


def test_suppress_and_restore(client: TestClient, auth: Auth) -> None:
    memory = create(client, auth).json()
    url = f"{BASE}/{memory['memory_id']}"
    suppressed = client.post(f"{url}/suppress", headers=auth()).json()
    assert (suppressed["status"], suppressed["revision"]) == ("suppressed", 1)
    listed = client.get(BASE, params={"status": "suppressed"}, headers=auth()).json()["items"]
    assert [m["memory_id"] for m in listed] == [memory["memory_id"]]
    assert client.post(f"{url}/restore", headers=auth()).json()["status"] == "active"


def test_versions_and_version_restore(client: TestClient, auth: Auth) -> None:
    memory = create(client, auth).json()
    url = f"{BASE}/{memory['memory_id']}"
    client.patch(url, json={"expected_revision": 1, "content": "Rules first"}, headers=auth())
    versions = client.get(f"{url}/versions", headers=auth()).json()["items"]
    assert [(v["revision"], v["change_type"], v["changed_via"]) for v in versions] == [
        (1, "create", "user_api"),
        (2, "update", "user_api"),
    ]
    restored = client.post(
        f"{url}/versions/1/restore", json={"expected_revision": 2}, headers=auth()
    )
    assert restored.status_code == 200
    assert (restored.json()["revision"], restored.json()["content"]) == (
        3,
        "I prefer examples first",
    )
    stale = client.post(f"{url}/versions/1/restore", json={"expected_revision": 2}, headers=auth())
    assert stale.status_code == 409 and stale.json()["current_revision"] == 3
    missing = client.post(
        f"{url}/versions/9/restore", json={"expected_revision": 3}, headers=auth()
    )
    assert missing.status_code == 422


def test_forgotten_is_410_for_the_owner_and_404_for_others(client: TestClient, auth: Auth) -> None:
    memory = create(client, auth).json()
    url = f"{BASE}/{memory['memory_id']}"
    assert client.delete(url, headers=auth()).status_code == 204
    for method, path, body in [
        ("GET", url, None),
        ("DELETE", url, None),
        ("PATCH", url, {"expected_revision": 1, "content": "x"}),
        ("POST", f"{url}/suppress", None),
        ("POST", f"{url}/restore", None),
        ("GET", f"{url}/versions", None),
    ]:
        owner = client.request(method, path, json=body, headers=auth())
        assert owner.status_code == 410 and owner.json()["reason"] == "forgotten", (method, path)
        other = client.request(method, path, json=body, headers=auth("mallory"))
        assert other.status_code == 404, (method, path)


def test_another_users_memory_is_404_everywhere(client: TestClient, auth: Auth) -> None:
    memory = create(client, auth).json()
    url = f"{BASE}/{memory['memory_id']}"
    for method, path, body in [
        ("GET", url, None),
        ("PATCH", url, {"expected_revision": 1, "content": "x"}),
        ("DELETE", url, None),
        ("POST", f"{url}/suppress", None),
        ("POST", f"{url}/restore", None),
        ("GET", f"{url}/versions", None),
        ("POST", f"{url}/versions/1/restore", {"expected_revision": 1}),
    ]:
        assert client.request(method, path, json=body, headers=auth("mallory")).status_code == 404
    assert client.get(BASE, headers=auth("mallory")).json()["items"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-a-jwt"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.wrong-signature"},
    ],
)
def test_missing_or_bad_tokens_are_401(client: TestClient, headers: dict[str, str]) -> None:
    response = client.post(BASE, json={"bad": "body"}, headers=headers)
    assert response.status_code == 401  # identity is checked before validation


def test_expired_tokens_are_401(client: TestClient) -> None:
    token = mint_token(JWT_SECRET, "alice", ttl=timedelta(seconds=-1))
    assert client.get(BASE, headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_pagination_walks_every_memory_once(client: TestClient, auth: Auth) -> None:
    ids = {
        create(client, auth, memory_key=f"k{i}", content=f"fact {i}").json()["memory_id"]
        for i in range(7)
    }
    seen, cursor = [], None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = client.get(BASE, params=params, headers=auth()).json()
        seen += [m["memory_id"] for m in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert sorted(seen) == sorted(ids)
    assert client.get(BASE, params={"limit": 201}, headers=auth()).status_code == 422
    assert client.get(BASE, params={"cursor": "garbage"}, headers=auth()).status_code == 422


def test_legacy_endpoints_act_on_global_scope_only(client: TestClient, auth: Auth) -> None:
    create(
        client,
        auth,
        memory_key="lang",
        content="Answer in Rust",
        scope_type="workspace",
        workspace_type="research",
    )
    put = client.put(
        "/me/memories",
        json={"memory_key": "lang", "content": "Answer in Python", "category": "preference"},
        headers=auth(),
    )
    assert put.status_code == 200
    assert put.json() == {
        "memory_key": "lang",
        "content": "Answer in Python",
        "category": "preference",
    }
    replaced = client.put(
        "/me/memories",
        json={"memory_key": "lang", "content": "Use Go", "category": "preference"},
        headers=auth(),
    )
    assert replaced.json()["content"] == "Use Go"
    assert client.get("/me/memories", headers=auth()).json() == [
        {"memory_key": "lang", "content": "Use Go", "category": "preference"}
    ]
    assert client.delete("/me/memories/lang", headers=auth()).status_code == 204
    assert client.delete("/me/memories/lang", headers=auth()).status_code == 404
    assert client.get("/me/memories", headers=auth()).json() == []
    workspace = client.get(BASE, params={"scope_type": "workspace"}, headers=auth()).json()
    assert [m["content"] for m in workspace["items"]] == ["Answer in Rust"]
