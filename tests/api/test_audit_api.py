"""GET /audit/events over HTTP: auditors only, ledger order, never content or keys in clear."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.access_log import AccessLog
from api.app import create_app
from api.services import Services

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
AUDIT = "/audit/events"
FIELDS = {
    "position",
    "event_id",
    "event_type",
    "memory_id",
    "user_id",
    "scope_type",
    "workspace_type",
    "revision",
    "content_hash",
    "occurred_at",
    "request_id",
}


def auditor(auth: Auth) -> dict[str, str]:
    return auth("audrey", roles=["auditor"])


def create(client: TestClient, auth: Auth, user: str = "alice", **fields: Any) -> dict[str, Any]:
    body = {
        "memory_key": "style",
        "content": "I prefer examples first",
        "category": "preference",
        "scope_type": "global",
    } | fields
    response = client.post(BASE, json=body, headers=auth(user))
    assert response.status_code == 201, response.text
    return response.json()


def test_every_change_is_audited_with_its_request_id_and_no_content(
    client: TestClient, auth: Auth
) -> None:
    marker = f"zq{uuid.uuid4().hex[:10]}"  # unique: found in the answer only if content leaks
    key_marker = f"key_{marker}"
    content = f"My secret hobby is {marker} 我喜欢{marker}"
    ids = {
        step: f"req-{step}-{uuid.uuid4().hex[:8]}"
        for step in ("create", "patch", "version", "suppress", "restore", "forget")
    }

    def call(method: str, path: str, step: str, body: Any = None) -> Any:
        headers = auth() | {"X-Request-ID": ids[step]}
        response = client.request(method, path, json=body, headers=headers)
        assert response.status_code in (200, 201, 204), response.text
        assert response.headers["X-Request-ID"] == ids[step]
        return response

    body = {
        "memory_key": key_marker,
        "content": content,
        "category": "background",
        "scope_type": "workspace",
        "workspace_type": "research",
    }
    memory = call("POST", BASE, "create", body).json()
    url = f"{BASE}/{memory['memory_id']}"
    call("PATCH", url, "patch", {"expected_revision": 1, "content": f"{marker} updated"})
    call("POST", f"{url}/versions/1/restore", "version", {"expected_revision": 2})
    call("POST", f"{url}/suppress", "suppress")
    call("POST", f"{url}/restore", "restore")

    def audited() -> Any:
        response = client.get(
            AUDIT, params={"memory_id": memory["memory_id"]}, headers=auditor(auth)
        )
        assert response.status_code == 200, response.text
        assert marker not in response.text and marker.upper() not in response.text
        return response.json()

    before = audited()["items"]
    call("DELETE", url, "forget")
    page = audited()
    items = page["items"]
    assert all(set(item) == FIELDS for item in items)
    assert [(i["event_type"], i["request_id"]) for i in items] == [
        ("memory.created", ids["create"]),
        ("memory.updated", ids["patch"]),
        ("memory.version_restored", ids["version"]),
        ("memory.suppressed", ids["suppress"]),
        ("memory.restored", ids["restore"]),
        ("memory.deleted", ids["forget"]),
    ]
    assert items[: len(before)] == before  # the trail only grows, also across a forget
    assert [i["revision"] for i in items[:3]] == [1, 2, 3]
    assert {i["user_id"] for i in items} == {"alice"}
    assert {(i["scope_type"], i["workspace_type"]) for i in items[:3]} == {
        ("workspace", "research")
    }
    positions = [i["position"] for i in items]  # one user's: strictly increasing
    assert positions == sorted(set(positions)) and isinstance(page["next_after"], str)
    # the hash is keyed: not the plain digest of the content, and equal for equal content
    hashes = [i["content_hash"] for i in items[:3]]
    assert all(hashes) and hashes[0] == hashes[2] != hashes[1]
    for text in (content, content.lower(), content.strip()):
        plain = {hashlib.sha256(text.encode()).hexdigest(), hashlib.md5(text.encode()).hexdigest()}
        assert not plain & set(hashes)
    everything = client.get(AUDIT, params={"limit": 1000}, headers=auditor(auth))
    assert marker not in everything.text and key_marker not in everything.text


def test_a_read_recorded_after_its_memory_was_forgotten_stays_in_the_trail(
    services: Services, auth: Auth
) -> None:
    """Access records are written after the answer: one of a read that came just before a
    forget commits after the forget, and is still the auditor's to see."""
    services.access_log = log = AccessLog(services.ledger, interval=60.0)  # held until flushed
    with TestClient(create_app(services)) as client:
        memory = create(client, auth)
        url = f"{BASE}/{memory['memory_id']}"
        assert client.get(f"{url}/versions", headers=auth()).status_code == 200
        assert log.pending == 1  # queued, not written
        assert client.delete(url, headers=auth()).status_code == 204
        assert log.flush() and log.state().written == 1
        trail = client.get(AUDIT, params={"memory_id": memory["memory_id"]}, headers=auditor(auth))
    assert trail.status_code == 200, trail.text
    items = trail.json()["items"]
    assert [e["event_type"] for e in items] == ["memory.created", "memory.deleted", "memory.read"]
    read = items[-1]
    assert (read["user_id"], read["revision"]) == ("alice", 1)
    assert items[1]["position"] < read["position"]  # committed after the forget


def test_only_auditors_read_the_trail(client: TestClient, auth: Auth) -> None:
    create(client, auth)
    assert client.get(AUDIT).status_code == 401
    assert client.get(AUDIT, headers={"Authorization": "Bearer nope"}).status_code == 401
    for headers in (auth(), auth(roles=["admin"]), auth(roles=["Auditor"])):
        denied = client.get(AUDIT, headers=headers)
        assert denied.status_code == 403
        assert denied.json()["reason"] == "not_auditor"
        assert isinstance(denied.json()["detail"], str)
    allowed = client.get(AUDIT, headers=auth("alice", roles=["admin", "auditor"]))
    assert allowed.status_code == 200
    assert [i["event_type"] for i in allowed.json()["items"]] == [
        "memory.created",
        "memory.projection_created",  # "I prefer examples first" feeds the profile
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 1001}, "limit"),
        ({"limit": 0}, "limit"),
        ({"after": -1}, "after"),
        ({"after": "bm90IGEgY3Vyc29y"}, "after"),
        ({"memory_id": "not-a-uuid"}, "memory_id"),
        ({"user_id": "x" * 201}, "user_id"),
    ],
)
def test_invalid_queries_are_422_before_the_role_is_checked(
    client: TestClient, auth: Auth, params: dict[str, Any], field: str
) -> None:
    for headers in (auditor(auth), auth()):  # validation answers before policy (403)
        response = client.get(AUDIT, params=params, headers=headers)
        assert response.status_code == 422
        assert isinstance(response.json()["detail"], str) and field in response.json()["detail"]
    assert client.get(AUDIT, params=params).status_code == 401  # identity first of all


def test_pages_walk_every_event_once_and_filters_narrow(client: TestClient, auth: Auth) -> None:
    for i in range(4):
        create(client, auth, "alice", memory_key=f"a{i}", content=f"alice fact {i}")
        create(client, auth, "bob", memory_key=f"b{i}", content=f"bob fact {i}")
    seen: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 3} | ({"after": after} if after else {})
        page = client.get(AUDIT, params=params, headers=auditor(auth))
        assert page.status_code == 200
        items = page.json()["items"]
        if not items:
            assert page.json()["next_after"] == after  # nothing newer: poll again from here
            break
        assert len(items) <= 3 and page.json()["next_after"] != after
        seen += items
        after = page.json()["next_after"]
    assert len(seen) == 8 and len({i["event_id"] for i in seen}) == 8
    for user in ("alice", "bob"):  # each user's events in their order (across: by time)
        positions = [i["position"] for i in seen if i["user_id"] == user]
        assert positions == sorted(positions) and len(positions) == 4
    bobs = client.get(AUDIT, params={"user_id": "bob"}, headers=auditor(auth)).json()["items"]
    assert [i["user_id"] for i in bobs] == ["bob"] * 4
    assert {i["event_type"] for i in bobs} == {"memory.created"}
    first = client.get(AUDIT, params={"user_id": "bob", "limit": 2}, headers=auditor(auth)).json()
    assert first["items"] == bobs[:2]
    later = client.get(
        AUDIT, params={"user_id": "bob", "after": first["next_after"]}, headers=auditor(auth)
    ).json()
    assert later["items"] == bobs[2:]
    one = bobs[0]["memory_id"]
    only = client.get(AUDIT, params={"memory_id": one}, headers=auditor(auth)).json()["items"]
    assert [i["memory_id"] for i in only] == [one]
    nobody = client.get(AUDIT, params={"user_id": "carol"}, headers=auditor(auth)).json()
    assert nobody["items"] == [] and isinstance(nobody["next_after"], str)
    # A decimal position from before partitions still reads as "after that notification id":
    # every event here was written since (none has a notification id), so all follow it.
    from_start = client.get(AUDIT, params={"after": 0}, headers=auditor(auth)).json()
    assert len(from_start["items"]) == 8
    old_cursor = client.get(AUDIT, params={"after": 10_000}, headers=auditor(auth)).json()
    assert old_cursor["items"] == from_start["items"]


def test_defaults_are_after_0_and_limit_100(client: TestClient, auth: Auth) -> None:
    for i in range(3):
        create(client, auth, memory_key=f"k{i}", content=f"fact {i}")
    page = client.get(AUDIT, headers=auditor(auth)).json()
    assert len(page["items"]) == 3 and page["items"][0]["position"] >= 1


def test_profile_changes_follow_their_event_and_pages_never_split_an_event(
    client: TestClient, auth: Auth
) -> None:
    # Two profile fields from one memory: its creation is three rows at one position.
    memory = create(client, auth, content="我喜欢先看例子再理解定义,请用中文回答")
    client.post(f"{BASE}/{memory['memory_id']}/suppress", headers=auth())
    everything = client.get(AUDIT, headers=auditor(auth)).json()["items"]
    kinds = [(i["event_type"], i["position"]) for i in everything]
    created, suppressed = everything[0]["position"], everything[-1]["position"]
    assert kinds == [
        ("memory.created", created),
        ("memory.projection_created", created),
        ("memory.projection_created", created),
        ("memory.suppressed", suppressed),
        ("memory.projection_removed", suppressed),
        ("memory.projection_removed", suppressed),
    ]
    derived = everything[1:3] + everything[4:]
    assert all(i["memory_id"] == memory["memory_id"] and i["content_hash"] is None for i in derived)
    assert len({i["event_id"] for i in everything}) == 6

    def walk(limit: int) -> list[list[tuple[str, int]]]:
        pages: list[list[tuple[str, int]]] = []
        params: dict[str, Any] = {"limit": limit}
        while page := client.get(AUDIT, params=params, headers=auditor(auth)).json():
            if not page["items"]:
                return pages
            pages.append([(i["event_type"], i["position"]) for i in page["items"]])
            params["after"] = page["next_after"]
        return pages

    assert walk(4) == [kinds[:3], kinds[3:]]  # the 4th row would split the suppression
    assert walk(1) == [kinds[:3], kinds[3:]]  # one event's rows come together, whatever the limit
    assert walk(6) == [kinds]
