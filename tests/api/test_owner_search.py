"""The owner's search, `GET /me/core-memories?q=`: the search tool's retrieval over every scope
of the owner's memories, with the list's filters and paging, recorded as a read."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.access_log import AccessLog
from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService
from tests.conftest import JWT_SECRET

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"


@pytest.fixture
def services(services: Services, ledger: MemoryLedger) -> Iterator[Services]:
    """The services with an access log, as `serve` builds them (the `client` fixture's).

    Not autouse: it starts the conftest's worker, whose embeddings projection has no embedder;
    a test that builds a worker of its own over the same schema must not race it."""
    services.access_log = AccessLog(ledger, interval=0.01)
    yield services
    services.access_log.close()


def remember(
    client: TestClient, auth: Auth, key: str, content: str, user: str = "alice", **fields: Any
) -> Any:
    body = {
        "memory_key": key,
        "content": content,
        "category": "preference",
        "scope_type": "global",
    } | fields
    response = client.post(BASE, json=body, headers=auth(user))
    assert response.status_code == 201, response.text
    return response.json()


def found(client: TestClient, auth: Auth, q: str, user: str = "alice", **params: Any) -> Any:
    response = client.get(BASE, params={"q": q, **params}, headers=auth(user))
    assert response.status_code == 200, response.text
    return response.json()


def keys(page: Any) -> list[str]:
    return [item["memory_key"] for item in page["items"]]


def test_every_scope_is_searched_and_each_item_is_a_memory_with_relevance(
    client: TestClient, auth: Auth
) -> None:
    remember(client, auth, "editor", "I write code in Neovim")
    remember(
        client,
        auth,
        "editor",
        "Neovim with a teaching colour scheme",
        scope_type="workspace",
        workspace_type="teaching",
    )
    remember(
        client,
        auth,
        "editor_plugins",
        "Neovim plugins: telescope",
        scope_type="workspace",
        workspace_type="learning",
    )
    remember(client, auth, "lunch", "I eat lunch at noon")

    page = found(client, auth, "neovim")

    assert sorted(keys(page)) == ["editor", "editor", "editor_plugins"]
    assert {(i["scope_type"], i["workspace_type"]) for i in page["items"]} == {
        ("global", None),
        ("workspace", "teaching"),
        ("workspace", "learning"),
    }
    scores = [item["relevance"] for item in page["items"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    first = page["items"][0]
    assert {"memory_id", "revision", "status", "created_at", "expires_at"} <= set(first)
    assert page["next_cursor"] is None


def test_the_filters_narrow_the_search(client: TestClient, auth: Auth) -> None:
    remember(client, auth, "editor", "I write code in Neovim")
    teaching = remember(
        client,
        auth,
        "editor",
        "Neovim in class",
        scope_type="workspace",
        workspace_type="teaching",
        category="constraint",
    )
    hidden = remember(client, auth, "old_editor", "Neovim before, now something else")
    response = client.post(f"{BASE}/{hidden['memory_id']}/suppress", headers=auth())
    assert response.status_code == 200

    assert len(found(client, auth, "neovim")["items"]) == 3  # suppressed ones too
    only_teaching = found(client, auth, "neovim", scope_type="workspace", workspace_type="teaching")
    assert [i["memory_id"] for i in only_teaching["items"]] == [teaching["memory_id"]]
    assert keys(found(client, auth, "neovim", scope_type="global", status="active")) == ["editor"]
    suppressed = found(client, auth, "neovim", status="suppressed")
    assert [(i["memory_id"], i["status"]) for i in suppressed["items"]] == [
        (hidden["memory_id"], "suppressed")
    ]
    assert keys(found(client, auth, "neovim", category="constraint")) == ["editor"]


def test_nothing_of_another_user_and_nothing_unrelated(client: TestClient, auth: Auth) -> None:
    remember(client, auth, "editor", "I write code in Neovim", user="bob")
    remember(client, auth, "lunch", "I eat lunch at noon")

    assert found(client, auth, "neovim")["items"] == []
    assert keys(found(client, auth, "neovim", user="bob")) == ["editor"]


def test_a_forgotten_memory_is_never_found(client: TestClient, auth: Auth) -> None:
    kept = remember(client, auth, "editor", "I write code in Neovim")
    gone = remember(client, auth, "old_editor", "Neovim, years ago")
    response = client.delete(f"{BASE}/{gone['memory_id']}", headers=auth())
    assert response.status_code == 204

    page = found(client, auth, "neovim")
    assert [i["memory_id"] for i in page["items"]] == [kept["memory_id"]]


def test_paging_walks_the_ranking_once(client: TestClient, auth: Auth) -> None:
    made = {
        remember(client, auth, f"tea_{i}", f"tea note {i}: green tea in the morning")["memory_id"]
        for i in range(5)
    }
    everything = found(client, auth, "green tea", limit=200)["items"]
    seen: list[Any] = []
    cursor = None
    while True:
        page = found(client, auth, "green tea", limit=2, **({"cursor": cursor} if cursor else {}))
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(page["items"]) == 2

    assert [i["memory_id"] for i in seen] == [i["memory_id"] for i in everything]
    assert {i["memory_id"] for i in seen} == made


@pytest.mark.parametrize(
    "cursor",
    ["not-a-cursor", "WyJjMSIsNDJd"],  # garbage; another kind of cursor (the change feed's)
)
def test_a_cursor_this_search_did_not_hand_out_is_422(
    client: TestClient, auth: Auth, cursor: str
) -> None:
    response = client.get(BASE, params={"q": "tea", "cursor": cursor}, headers=auth())
    assert response.status_code == 422 and isinstance(response.json()["detail"], str)


def test_a_list_cursor_is_not_a_search_cursor(client: TestClient, auth: Auth) -> None:
    for i in range(3):
        remember(client, auth, f"tea_{i}", f"green tea {i}")
    cursor = client.get(BASE, params={"limit": 1}, headers=auth()).json()["next_cursor"]
    assert cursor is not None

    response = client.get(BASE, params={"q": "tea", "cursor": cursor}, headers=auth())
    assert response.status_code == 422


@pytest.mark.parametrize("q", ["", "x" * 501, "tea\x00", "tea\x1b"])
def test_q_outside_1_to_500_characters_or_with_controls_is_422(
    client: TestClient, auth: Auth, q: str
) -> None:
    response = client.get(BASE, params={"q": q}, headers=auth())
    assert response.status_code == 422 and isinstance(response.json()["detail"], str)


def test_500_characters_are_fine(client: TestClient, auth: Auth) -> None:
    remember(client, auth, "editor", "I write code in Neovim")
    assert found(client, auth, "neovim " + "x" * 493)["next_cursor"] is None


def test_the_search_is_recorded_as_a_read_of_what_it_returned(
    client: TestClient, auth: Auth, services: Services
) -> None:
    first = remember(client, auth, "editor", "I write code in Neovim")
    second = remember(client, auth, "editor_font", "Neovim with a large font")
    remember(client, auth, "lunch", "I eat lunch at noon")

    response = client.get(
        BASE, params={"q": "neovim"}, headers=auth() | {"X-Request-ID": "req-owner-search"}
    )
    assert response.status_code == 200

    assert services.access_log is not None and services.access_log.flush()
    audit = client.get(
        "/audit/events", params={"limit": 1000}, headers=auth("audrey", roles=["auditor"])
    ).json()["items"]
    reads = [r for r in audit if r["request_id"] == "req-owner-search"]
    assert {r["event_type"] for r in reads} == {"memory.read"}
    returned = [i["memory_id"] for i in response.json()["items"]]
    assert [r["memory_id"] for r in reads] == returned
    assert set(returned) == {first["memory_id"], second["memory_id"]}


def test_an_agent_turn_token_is_403(client: TestClient, auth: Auth) -> None:
    response = client.get(BASE, params={"q": "tea"}, headers=auth(mode="no_write"))
    assert response.status_code == 403 and response.json()["reason"] == "agent_token"


@pytest.mark.slow  # ~8 s
def test_it_finds_by_meaning_across_languages(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
    auth: Auth,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    made = {
        key: ledger.create_memory(
            "alice", scope=scope, memory_key=key, content=content, category="preference"
        ).memory
        for key, content, scope in [
            ("explanation_preference", "我更喜欢先看例子再看定义", Scope.global_()),
            (
                "study_time",
                "On weekdays I can only study for one hour.",
                Scope.workspace("research"),
            ),
            ("lunch", "I eat lunch at noon", Scope.global_()),
        ]
    }
    worker.catch_up()  # every view, the vectors included
    services = Services(
        ledger=ledger,
        reads=Reads(worker.pool, worker.schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret=JWT_SECRET,
        worker=worker,
        embeddings=embedding_service,
    )
    with TestClient(create_app(services)) as client:
        by_english = found(client, auth, "examples before definitions")["items"]
        by_chinese = found(client, auth, "工作日我能学习多久")["items"]

    chinese, english = made["explanation_preference"], made["study_time"]
    assert chinese is not None and english is not None
    assert by_english and by_english[0]["memory_id"] == str(chinese.memory_id)
    assert by_chinese and by_chinese[0]["memory_id"] == str(english.memory_id)
