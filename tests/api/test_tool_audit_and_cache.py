"""Agent tools over HTTP: access audit (memory.read / memory.search / memory.policy_denied), the
search cache of section 16, and the workspace content rules of section 11."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.access_log import AccessLog
from api.app import create_app
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from retrieval.cache import QueryCache
from retrieval.search import MemorySearch

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
AUDIT = "/audit/events"


@pytest.fixture(autouse=True)
def audited(services: Services, ledger: MemoryLedger) -> Iterator[Services]:
    """The services as `serve` builds them: an access log and a search cache."""
    services.access_log = AccessLog(ledger, interval=0.01)
    services.search_cache = QueryCache(ttl=60)
    services.search = MemorySearch(services.search_cache)  # built with the cache, as serve does
    yield services
    services.access_log.close()


def agent(auth: Auth, user: str = "alice", workspace: str | None = "learning", **claims: Any):
    return auth(user, workspace=workspace, **claims)


def call(client: TestClient, headers: dict[str, str], tool: str, request_id: str = "", **body):
    if request_id:
        headers = headers | {"X-Request-ID": request_id}
    return client.post(f"/tools/{tool}", json=body, headers=headers)


def remember(client: TestClient, auth: Auth, user: str = "alice", **fields: Any) -> Any:
    body = {
        "memory_key": "style",
        "content": "I prefer examples before definitions",
        "category": "preference",
        "scope_type": "global",
    } | fields
    response = client.post(BASE, json=body, headers=auth(user))
    assert response.status_code in (200, 201), response.text
    return response.json()


def audit(client: TestClient, auth: Auth, services: Services, **params: Any) -> list[Any]:
    """Every audit row (after the queued access records were written)."""
    assert services.access_log is not None and services.access_log.flush()
    response = client.get(
        AUDIT, params={"limit": 1000, **params}, headers=auth("audrey", roles=["auditor"])
    )
    assert response.status_code == 200, response.text
    return response.json()["items"]


def settle(services: Services) -> None:
    """Write the queued access records and let every projection reach the ledger's head.

    The cache is bypassed while the memories and revisions projections stand at different
    positions (between two transactions of one batch); tests that count hits wait for that.
    """
    assert services.access_log is not None and services.access_log.flush()
    services.wait_for_ledger(
        [p.name for p in services.worker.projections] if services.worker else []
    )


def search(client: TestClient, auth: Auth, query: str, **body: Any) -> list[Any]:
    response = call(client, agent(auth), "search_core_memories", query=query, **body)
    assert response.status_code == 200, response.text
    return response.json()["items"]


# -- audit -------------------------------------------------------------------------------------


def test_a_search_records_the_returned_ids_with_the_request_id_and_never_the_query(
    client: TestClient, auth: Auth, services: Services
) -> None:
    marker = f"zq{uuid.uuid4().hex[:8]}"
    first = remember(client, auth, memory_key="a", content=f"{marker} examples first")
    second = remember(
        client,
        auth,
        memory_key="b",
        content=f"{marker} short answers",
        scope_type="workspace",
        workspace_type="learning",
    )
    remember(client, auth, memory_key="c", content="unrelated tea")

    response = call(client, agent(auth), "search_core_memories", "req-search-1", query=marker)

    returned = [i["memory_id"] for i in response.json()["items"]]
    assert sorted(returned) == sorted([first["memory_id"], second["memory_id"]])
    rows = audit(client, auth, services, user_id="alice")
    searches = [r for r in rows if r["event_type"] == "memory.search"]
    assert [r["memory_id"] for r in searches] == returned  # in rank order
    assert {r["request_id"] for r in searches} == {"req-search-1"}
    assert {(r["scope_type"], r["workspace_type"]) for r in searches} == {
        ("global", None),
        ("workspace", "learning"),
    }
    assert all(r["revision"] == 1 and r["content_hash"] is None for r in searches)
    raw = client.get(AUDIT, params={"limit": 1000}, headers=auth("audrey", roles=["auditor"]))
    assert marker not in raw.text  # neither the query nor any content


def test_an_empty_search_is_recorded_without_a_memory(
    client: TestClient, auth: Auth, services: Services
) -> None:
    remember(client, auth)

    call(client, agent(auth), "search_core_memories", "req-empty", query="weather tomorrow")

    [row] = [r for r in audit(client, auth, services) if r["event_type"] == "memory.search"]
    assert (row["memory_id"], row["request_id"], row["workspace_type"]) == (
        None,
        "req-empty",
        "learning",
    )


def test_a_cached_search_is_recorded_too(
    client: TestClient, auth: Auth, services: Services
) -> None:
    memory = remember(client, auth)

    call(client, agent(auth), "search_core_memories", "req-1", query="examples")
    settle(services)
    call(client, agent(auth), "search_core_memories", "req-2", query="examples")

    rows = [r for r in audit(client, auth, services) if r["event_type"] == "memory.search"]
    assert [(r["request_id"], r["memory_id"]) for r in rows] == [
        ("req-1", memory["memory_id"]),
        ("req-2", memory["memory_id"]),
    ]
    assert services.search_cache is not None and services.search_cache.hits == 1


def test_a_list_records_every_listed_memory_as_read(
    client: TestClient, auth: Auth, services: Services
) -> None:
    memories = [remember(client, auth, memory_key=f"k{i}", content=f"fact {i}") for i in range(3)]

    listed = call(client, agent(auth), "list_core_memories", "req-list").json()["items"]

    reads = [r for r in audit(client, auth, services) if r["event_type"] == "memory.read"]
    assert {r["memory_id"] for r in reads} == {m["memory_id"] for m in memories}
    assert [r["memory_id"] for r in reads] == [m["memory_id"] for m in listed]
    assert {r["request_id"] for r in reads} == {"req-list"}


@pytest.mark.parametrize(
    ("claims", "tool", "reason"),
    [
        ({"mode": "isolated"}, "search_core_memories", "isolated_mode"),
        ({"mode": "no_write"}, "forget_core_memory", "no_write_mode"),
        ({"tools": ["list_core_memories"]}, "search_core_memories", "tool_not_allowed"),
        ({"workspace": None}, "list_core_memories", "workspace_required"),
    ],
)
def test_a_denial_is_recorded_with_its_reason_and_workspace(
    client: TestClient,
    auth: Auth,
    services: Services,
    claims: dict[str, Any],
    tool: str,
    reason: str,
) -> None:
    bodies = {
        "search_core_memories": {"query": "x"},
        "forget_core_memory": {"memory_id": str(uuid.uuid4())},
        "list_core_memories": {},
    }
    headers = auth("alice", **({"workspace": "teaching"} | claims))

    response = call(client, headers, tool, "req-denied", **bodies[tool])

    assert response.status_code == 403 and response.json()["reason"] == reason
    [row] = [r for r in audit(client, auth, services) if r["event_type"] == "memory.policy_denied"]
    assert (row["user_id"], row["request_id"], row["memory_id"]) == ("alice", "req-denied", None)
    assert row["workspace_type"] == claims.get("workspace", "teaching")


def test_the_memory_filter_shows_which_requests_saw_a_memory(
    client: TestClient, auth: Auth, services: Services
) -> None:
    memory = remember(client, auth)
    remember(client, auth, memory_key="other", content="examples of tea")
    call(client, agent(auth), "search_core_memories", "req-a", query="definitions")
    call(client, agent(auth), "list_core_memories", "req-b")

    rows = audit(client, auth, services, memory_id=memory["memory_id"])

    assert [(r["event_type"], r["request_id"]) for r in rows][-2:] == [
        ("memory.search", "req-a"),
        ("memory.read", "req-b"),
    ]


def test_shutdown_writes_the_queued_records(
    services: Services, auth: Auth, ledger: MemoryLedger
) -> None:
    assert services.access_log is not None
    services.access_log.interval = 60.0  # nothing is written before shutdown on its own
    with TestClient(create_app(services)) as client:
        call(client, agent(auth, mode="isolated"), "list_core_memories")
        head = ledger.recorded()
    # Leaving the client runs the app's shutdown, which closes the access log.
    assert services.access_log.pending == 0 and ledger.recorded() == head + 1


# -- the search cache --------------------------------------------------------------------------


def test_a_repeated_search_is_served_from_the_cache(
    client: TestClient, auth: Auth, services: Services
) -> None:
    remember(client, auth)

    first = search(client, auth, "examples")
    settle(services)
    second = search(client, auth, "  Examples ")

    assert first == second and len(first) == 1
    assert services.search_cache is not None
    assert (services.search_cache.hits, services.search_cache.misses) == (1, 1)


def test_a_forgotten_memory_never_comes_back_from_the_cache(
    client: TestClient, auth: Auth, services: Services
) -> None:
    memory = remember(client, auth)
    found = search(client, auth, "examples")
    settle(services)
    assert search(client, auth, "examples") == found != []
    assert services.search_cache is not None and services.search_cache.hits == 1

    forgotten = call(client, agent(auth), "forget_core_memory", memory_id=memory["memory_id"])

    assert forgotten.status_code == 200
    # Right after the forget: the search waits for the forget's position, reads the advanced
    # revision and misses; the entry holding the memory is never looked up again.
    assert search(client, auth, "examples") == []
    assert services.search_cache.hits == 1


def test_a_forget_through_the_management_api_invalidates_too(
    client: TestClient, auth: Auth
) -> None:
    memory = remember(client, auth)
    assert search(client, auth, "examples")

    assert client.delete(f"{BASE}/{memory['memory_id']}", headers=auth()).status_code == 204

    assert search(client, auth, "examples") == []


@pytest.mark.parametrize(
    "change",
    [
        lambda c, a, m: c.patch(
            f"{BASE}/{m['memory_id']}",
            headers=a(),
            json={"expected_revision": 1, "content": "examples, then rules"},
        ),
        lambda c, a, m: c.post(f"{BASE}/{m['memory_id']}/suppress", headers=a()),
        lambda c, a, m: c.post(
            BASE,
            headers=a(),
            json={
                "memory_key": "more",
                "content": "more examples please",
                "category": "preference",
                "scope_type": "global",
            },
        ),
    ],
    ids=["update", "suppress", "create"],
)
def test_any_change_to_the_users_memories_misses_the_cache(
    client: TestClient, auth: Auth, services: Services, change: Any
) -> None:
    memory = remember(client, auth)
    before = search(client, auth, "examples")

    assert change(client, auth, memory).status_code in (200, 201)
    after = search(client, auth, "examples")

    assert after != before
    assert services.search_cache is not None and services.search_cache.hits == 0


def test_another_users_change_does_not_invalidate_and_is_never_shared(
    client: TestClient, auth: Auth, services: Services
) -> None:
    remember(client, auth)
    remember(client, auth, user="bob", content="bob prefers examples too")
    alice = search(client, auth, "examples")

    bob = call(client, agent(auth, "bob"), "search_core_memories", query="examples").json()
    settle(services)
    again = search(client, auth, "examples")

    assert [i["content"] for i in bob["items"]] == ["bob prefers examples too"]
    assert again == alice
    assert services.search_cache is not None and services.search_cache.hits == 1


def test_a_workspace_never_reuses_another_workspaces_result(client: TestClient, auth: Auth) -> None:
    remember(
        client,
        auth,
        content="examples in teaching",
        scope_type="workspace",
        workspace_type="teaching",
    )

    learning = search(client, auth, "examples")
    teaching = call(
        client, agent(auth, workspace="teaching"), "search_core_memories", query="examples"
    ).json()["items"]

    assert learning == [] and len(teaching) == 1


def test_the_policy_is_checked_before_the_cache(client: TestClient, auth: Auth) -> None:
    remember(client, auth)
    assert search(client, auth, "examples")

    client.patch("/me/memory-settings", json={"saved_memory_enabled": False}, headers=auth())
    denied = call(client, agent(auth), "search_core_memories", query="examples")

    assert denied.status_code == 403 and denied.json()["reason"] == "memory_disabled"


def test_an_expiring_memory_leaves_the_cached_result_when_it_expires(
    client: TestClient, auth: Auth, clock: Any, services: Services
) -> None:
    remember(client, auth, expires_at=(clock.now + timedelta(minutes=30)).isoformat())
    assert search(client, auth, "examples") == search(client, auth, "examples") != []

    clock.advance(minutes=31)  # no event: only the time bound can end the entry

    assert search(client, auth, "examples") == []


def test_a_global_memory_hidden_until_its_workspace_twin_expires_shows_from_then_on(
    client: TestClient, auth: Auth, clock: Any, services: Services
) -> None:
    remember(client, auth, memory_key="drink", content="likes green tea")
    remember(
        client,
        auth,
        memory_key="drink",
        content="prefers coffee while studying",
        scope_type="workspace",
        workspace_type="learning",
        expires_at=(clock.now + timedelta(minutes=30)).isoformat(),
    )
    # The workspace memory hides the global one with its key, without matching the query.
    assert search(client, auth, "green tea") == search(client, auth, "green tea") == []
    assert services.search_cache is not None and services.search_cache.hits == 1

    clock.advance(minutes=31)  # no event: the workspace memory's expiry must end the entry

    assert [item["content"] for item in search(client, auth, "green tea")] == ["likes green tea"]


def test_a_ttl_of_zero_turns_the_cache_off(
    client: TestClient, auth: Auth, services: Services
) -> None:
    services.search_cache = QueryCache(ttl=0)
    services.search = MemorySearch(services.search_cache)
    remember(client, auth)

    assert search(client, auth, "examples") == search(client, auth, "examples") != []
    assert services.search_cache.hits == services.search_cache.misses == 0


# -- workspace content rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workspace", "content", "rule"),
    [
        ("teaching", "学生张三数学不及格", "student personal"),
        ("teaching", "my student Tom has ADHD", "student personal"),
        ("research", "本项目的所有实验必须使用固定随机种子 42", "rule or instruction"),
        ("research", "For project Phoenix always use the v2 dataset", "rule or instruction"),
    ],
)
def test_the_tools_refuse_content_the_workspace_may_not_hold(
    client: TestClient, auth: Auth, workspace: str, content: str, rule: str
) -> None:
    body = {"memory_key": "note", "content": content, "category": "fact"}
    headers = agent(auth, workspace=workspace)

    for scope_type in ("workspace", "global"):  # global too: the agent is in that workspace
        for tool in ("save_core_memory", "propose_core_memory"):
            response = call(client, headers, tool, scope_type=scope_type, **body)
            assert response.status_code == 422, response.text
            detail = response.json()["detail"]
            assert rule.split()[0] in detail and f"{workspace} memories may not store it" in detail
            assert content not in response.text
            assert response.json()["errors"][0]["field"] == "content"


def test_the_same_content_is_fine_in_learning(client: TestClient, auth: Auth) -> None:
    body = {"memory_key": "note", "content": "学生张三数学不及格", "category": "fact"}

    saved = call(client, agent(auth), "save_core_memory", scope_type="workspace", **body)

    assert saved.status_code == 200 and saved.json()["status"] == "created"


def test_a_tool_update_is_checked_against_the_workspace(client: TestClient, auth: Auth) -> None:
    memory = remember(
        client,
        auth,
        scope_type="workspace",
        workspace_type="teaching",
        content="I explain with examples",
    )

    response = call(
        client,
        agent(auth, workspace="teaching"),
        "update_core_memory",
        memory_id=memory["memory_id"],
        content="学生李四同学最近总是打架",
    )

    assert response.status_code == 422


def test_the_management_api_refuses_workspace_content_too(client: TestClient, auth: Auth) -> None:
    body = {
        "memory_key": "note",
        "content": "my student Tom has ADHD",
        "category": "fact",
        "scope_type": "workspace",
        "workspace_type": "teaching",
    }

    refused = client.post(BASE, json=body, headers=auth())
    in_global = client.post(
        BASE, json=body | {"scope_type": "global", "workspace_type": None}, headers=auth()
    )

    assert refused.status_code == 422 and "teaching" in refused.json()["detail"]
    assert in_global.status_code == 201  # the owner's own global memory: no workspace rule

    memory = remember(
        client,
        auth,
        memory_key="ok",
        content="short feedback",
        scope_type="workspace",
        workspace_type="teaching",
    )
    patch = client.patch(
        f"{BASE}/{memory['memory_id']}",
        headers=auth(),
        json={"expected_revision": 1, "content": "my student Tom has ADHD"},
    )
    assert patch.status_code == 422


def test_accepting_a_candidate_with_an_edit_is_checked(
    client: TestClient, auth: Auth, services: Services
) -> None:
    proposed = call(
        client,
        agent(auth, workspace="research"),
        "propose_core_memory",
        memory_key="method",
        content="I prefer Bayesian methods",
        category="preference",
        scope_type="workspace",
    ).json()
    candidate_id = proposed["candidate"]["candidate_id"]

    accepted = client.post(
        f"/me/memory-candidates/{candidate_id}/accept",
        json={"content": "All experiments in this project must run on the cluster"},
        headers=auth(),
    )

    assert accepted.status_code == 422
    assert "Research Project Profile" in accepted.json()["detail"]


def test_management_reads_record_what_they_returned(
    client: TestClient, auth: Auth, services: Services
) -> None:
    """The user's own reads through the management and legacy API are audited like tool reads."""
    first = remember(client, auth, memory_key="k1", content="fact one")
    second = remember(client, auth, memory_key="k2", content="fact two")
    headers = auth("alice")

    listed = client.get(BASE, headers=headers | {"X-Request-ID": "req-list"}).json()["items"]
    client.get(f"{BASE}/{first['memory_id']}", headers=headers | {"X-Request-ID": "req-get"})
    client.get(
        f"{BASE}/{second['memory_id']}/versions", headers=headers | {"X-Request-ID": "req-ver"}
    )
    client.get("/me/memories", headers=headers | {"X-Request-ID": "req-legacy"})

    reads = [
        (r["request_id"], r["memory_id"], r["revision"])
        for r in audit(client, auth, services)
        if r["event_type"] == "memory.read"
    ]
    assert reads[:2] == [("req-list", m["memory_id"], 1) for m in listed]
    assert reads[2:] == [
        ("req-get", first["memory_id"], 1),
        ("req-ver", second["memory_id"], 1),
        *sorted(
            [("req-legacy", m["memory_id"], 1) for m in (first, second)],
            key=lambda r: [m["memory_id"] for m in listed].index(r[1]),
        ),
    ]


def test_a_refused_management_read_records_nothing(
    client: TestClient, auth: Auth, services: Services
) -> None:
    memory = remember(client, auth)

    stranger = client.get(f"{BASE}/{memory['memory_id']}", headers=auth("mallory"))
    missing = client.get(f"{BASE}/{uuid.uuid4()}/versions", headers=auth("alice"))

    assert (stranger.status_code, missing.status_code) == (404, 404)
    assert [r for r in audit(client, auth, services) if r["event_type"] == "memory.read"] == []
