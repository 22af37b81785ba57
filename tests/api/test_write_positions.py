"""Every successful write answers `X-Position`; a read carrying it as `X-Min-Position` sees
state at least that new, from another process too (API_CONTRACT.md, "Shapes")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from domain.ledger.positions import parse_token, partition_of
from projections.worker import ProjectionWorker

Auth = Callable[..., dict[str, str]]
MEMORY = {
    "memory_key": "drink",
    "content": "I like green tea",
    "category": "preference",
    "scope_type": "global",
}
TOOL = {k: MEMORY[k] for k in ("memory_key", "content", "category", "scope_type")}
AGENT = {"workspace": "learning"}


@pytest.fixture
def elsewhere(
    services: Services, make_worker: Callable[..., ProjectionWorker]
) -> Iterator[TestClient]:
    """The API of another process: its own worker (standing by: it reads the tracking table)
    and no memory of this process's writes, so only X-Min-Position makes it wait."""
    other = dataclasses.replace(services, worker=make_worker(), metrics=Metrics(), _written={})
    with TestClient(create_app(other), raise_server_exceptions=False) as client:
        yield client


def memory(client: TestClient, auth: Auth, **fields: Any) -> dict[str, Any]:
    response = client.post("/me/core-memories", json={**MEMORY, **fields}, headers=auth())
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


def candidate(client: TestClient, auth: Auth) -> str:
    body = {**TOOL, "memory_key": "proposed", "content": "I study at night"}
    response = client.post("/tools/propose_core_memory", json=body, headers=auth(**AGENT))
    return str(response.json()["candidate"]["candidate_id"])


def edited(client: TestClient, auth: Auth) -> str:
    made = memory(client, auth)
    patch = {"expected_revision": 1, "content": "I like black tea"}
    client.patch(f"/me/core-memories/{made['memory_id']}", json=patch, headers=auth())
    return str(made["memory_id"])


def suppressed(client: TestClient, auth: Auth) -> str:
    made = memory(client, auth)
    client.post(f"/me/core-memories/{made['memory_id']}/suppress", headers=auth())
    return str(made["memory_id"])


# name: (setup → the write (method, path, body, agent?), what the later read shows)
Write = tuple[str, str, dict[str, Any] | None, bool]
Setup = Callable[[TestClient, Auth], Write]
Shows = Callable[[TestClient, dict[str, str]], None]


def contents(expected: list[str]) -> Shows:
    def check(client: TestClient, headers: dict[str, str]) -> None:
        response = client.get("/me/core-memories", headers=headers)
        assert response.status_code == 200, response.text
        assert [m["content"] for m in response.json()["items"]] == expected

    return check


def statuses(expected: list[str]) -> Shows:
    def check(client: TestClient, headers: dict[str, str]) -> None:
        response = client.get("/me/core-memories", headers=headers)
        assert [m["status"] for m in response.json()["items"]] == expected

    return check


def candidates(status: str, count: int) -> Shows:
    def check(client: TestClient, headers: dict[str, str]) -> None:
        response = client.get("/me/memory-candidates", params={"status": status}, headers=headers)
        assert len(response.json()["items"]) == count, response.text

    return check


def settings_show(enabled: bool) -> Shows:
    def check(client: TestClient, headers: dict[str, str]) -> None:
        response = client.get("/me/memory-settings", headers=headers)
        assert response.json()["auto_extract_enabled"] is enabled

    return check


TEA, BLACK = ["I like green tea"], ["I like black tea"]
WRITES: dict[str, tuple[Setup, Shows]] = {
    "create": (lambda c, a: ("POST", "/me/core-memories", MEMORY, False), contents(TEA)),
    "create, unchanged": (
        lambda c, a: (memory(c, a), ("POST", "/me/core-memories", MEMORY, False))[1],
        contents(TEA),
    ),
    "patch": (
        lambda c, a: (
            "PATCH",
            f"/me/core-memories/{memory(c, a)['memory_id']}",
            {"expected_revision": 1, "content": "I like black tea"},
            False,
        ),
        contents(BLACK),
    ),
    "delete": (
        lambda c, a: ("DELETE", f"/me/core-memories/{memory(c, a)['memory_id']}", None, False),
        contents([]),
    ),
    "suppress": (
        lambda c, a: (
            "POST",
            f"/me/core-memories/{memory(c, a)['memory_id']}/suppress",
            None,
            False,
        ),
        statuses(["suppressed"]),
    ),
    "restore": (
        lambda c, a: ("POST", f"/me/core-memories/{suppressed(c, a)}/restore", None, False),
        statuses(["active"]),
    ),
    "version restore": (
        lambda c, a: (
            "POST",
            f"/me/core-memories/{edited(c, a)}/versions/1/restore",
            {"expected_revision": 2},
            False,
        ),
        contents(TEA),
    ),
    "legacy put": (
        lambda c, a: (
            "PUT",
            "/me/memories",
            {k: MEMORY[k] for k in TOOL if k != "scope_type"},
            False,
        ),
        contents(TEA),
    ),
    "legacy delete": (
        lambda c, a: (memory(c, a), ("DELETE", "/me/memories/drink", None, False))[1],
        contents([]),
    ),
    "accept": (
        lambda c, a: ("POST", f"/me/memory-candidates/{candidate(c, a)}/accept", {}, False),
        contents(["I study at night"]),
    ),
    "reject": (
        lambda c, a: ("POST", f"/me/memory-candidates/{candidate(c, a)}/reject", None, False),
        candidates("rejected", 1),
    ),
    "settings": (
        lambda c, a: ("PATCH", "/me/memory-settings", {"auto_extract_enabled": False}, False),
        settings_show(False),
    ),
    "settings, unchanged": (
        lambda c, a: ("PATCH", "/me/memory-settings", {"auto_extract_enabled": True}, False),
        settings_show(True),
    ),
    "save": (lambda c, a: ("POST", "/tools/save_core_memory", TOOL, True), contents(TEA)),
    "save, unchanged": (
        lambda c, a: (memory(c, a), ("POST", "/tools/save_core_memory", TOOL, True))[1],
        contents(TEA),
    ),
    "save, candidate": (
        lambda c, a: (
            memory(c, a),
            ("POST", "/tools/save_core_memory", {**TOOL, "content": "I like coffee"}, True),
        )[1],
        candidates("pending", 1),
    ),
    "update": (
        lambda c, a: (
            "POST",
            "/tools/update_core_memory",
            {"memory_id": memory(c, a)["memory_id"], "content": "I like black tea"},
            True,
        ),
        contents(BLACK),
    ),
    "forget": (
        lambda c, a: (
            "POST",
            "/tools/forget_core_memory",
            {"memory_id": memory(c, a)["memory_id"]},
            True,
        ),
        contents([]),
    ),
    "propose": (
        lambda c, a: ("POST", "/tools/propose_core_memory", TOOL, True),
        candidates("pending", 1),
    ),
    "propose, duplicate": (
        lambda c, a: (memory(c, a), ("POST", "/tools/propose_core_memory", TOOL, True))[1],
        candidates("pending", 0),
    ),
}


@pytest.mark.parametrize("name", WRITES)
def test_every_write_answers_a_position_another_process_reads_at(
    client: TestClient, elsewhere: TestClient, auth: Auth, services: Services, name: str
) -> None:
    setup, shows = WRITES[name]
    method, path, body, agent = setup(client, auth)
    before = services.ledger.position("alice")

    response = client.request(method, path, json=body, headers=auth(**(AGENT if agent else {})))

    assert 200 <= response.status_code < 300, response.text
    position = response.headers.get("X-Position")
    assert position, f"{method} {path}: no X-Position"
    appended = not name.endswith(("unchanged", "duplicate"))
    at = parse_token(position)
    assert isinstance(at, int) and partition_of(at) == partition_of(before)
    assert before < at if appended else before <= at
    assert at <= services.ledger.position("alice")
    shows(elsewhere, {**auth(), "X-Min-Position": position})


def test_reads_and_failed_writes_answer_no_position(client: TestClient, auth: Auth) -> None:
    assert "X-Position" not in client.get("/me/core-memories", headers=auth()).headers
    missing = client.delete(
        "/me/core-memories/00000000-0000-4000-8000-000000000000", headers=auth()
    )
    assert missing.status_code == 404 and "X-Position" not in missing.headers
    search = client.post(
        "/tools/search_core_memories", json={"query": "tea"}, headers=auth(**AGENT)
    )
    assert search.status_code == 200 and "X-Position" not in search.headers


COVERED = {
    ("POST", "/me/core-memories"),
    ("PATCH", "/me/core-memories/{memory_id}"),
    ("DELETE", "/me/core-memories/{memory_id}"),
    ("POST", "/me/core-memories/{memory_id}/suppress"),
    ("POST", "/me/core-memories/{memory_id}/restore"),
    ("POST", "/me/core-memories/{memory_id}/versions/{revision}/restore"),
    ("PUT", "/me/memories"),
    ("DELETE", "/me/memories/{memory_key}"),
    ("POST", "/me/memory-candidates/{candidate_id}/accept"),
    ("POST", "/me/memory-candidates/{candidate_id}/reject"),
    ("PATCH", "/me/memory-settings"),
    ("POST", "/tools/save_core_memory"),
    ("POST", "/tools/update_core_memory"),
    ("POST", "/tools/forget_core_memory"),
    ("POST", "/tools/propose_core_memory"),
}
READ_TOOLS = {"/tools/search_core_memories", "/tools/list_core_memories"}


def test_the_cases_cover_every_write_route(client: TestClient) -> None:
    """A write route added later without a case here fails this test."""
    paths = client.get("/openapi.json").json()["paths"]
    writes = {
        (method.upper(), path)
        for path, operations in paths.items()
        for method in operations
        if method in ("post", "put", "patch", "delete")
        and (path.startswith("/me/") or path.startswith("/tools/"))
        and path not in READ_TOOLS
    }
    assert writes == COVERED
