"""The agent tools over HTTP (API_CONTRACT.md, 'Agent tools'): identity, body, policy, memory."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.policy import ALL_TOOLS, WRITE_TOOLS

Auth = Callable[..., dict[str, str]]
MISSING = "00000000-0000-4000-8000-000000000000"

SAVE = {
    "memory_key": "explanation_style",
    "content": "I prefer examples before definitions",
    "category": "preference",
    "scope_type": "global",
}
# A valid body for every tool; memory ids are filled in where a test needs a real one.
BODIES: dict[str, dict[str, Any]] = {
    "search_core_memories": {"query": "examples"},
    "list_core_memories": {},
    "save_core_memory": SAVE,
    "update_core_memory": {"memory_id": MISSING, "content": "Definitions first"},
    "forget_core_memory": {"memory_id": MISSING},
    "propose_core_memory": SAVE,
}


@pytest.fixture
def agent(auth: Auth) -> Callable[..., dict[str, str]]:
    """Headers of an agent turn: agent(user, workspace="learning", mode=..., tools=[...])."""

    def headers(user: str = "alice", workspace: str | None = "learning", **claims: Any) -> Any:
        return auth(user, workspace=workspace, **claims)

    return headers


def call(client: TestClient, headers: dict[str, str], tool: str, **body: Any) -> Any:
    return client.post(f"/tools/{tool}", json=body, headers=headers)


def remember(client: TestClient, auth: Auth, user: str = "alice", **fields: Any) -> Any:
    """Create a memory through the management API; returns it."""
    body = {**SAVE, **fields}
    response = client.post("/me/core-memories", json=body, headers=auth(user))
    assert response.status_code == 201, response.text
    return response.json()


# -- GET /tools --------------------------------------------------------------------------------


def test_the_tool_list_needs_a_token(client: TestClient) -> None:
    assert client.get("/tools").status_code == 401


def test_any_valid_token_reads_the_six_tools_with_their_schemas(
    client: TestClient, auth: Auth
) -> None:
    response = client.get("/tools", headers=auth("alice"))

    assert response.status_code == 200
    tools = {t["name"]: t for t in response.json()}
    assert set(tools) == ALL_TOOLS
    for tool in tools.values():
        schema = tool["input_schema"]
        assert tool["description"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not {"user_id", "workspace", "workspace_type"} & set(schema["properties"])
    assert tools["search_core_memories"]["input_schema"]["required"] == ["query"]
    assert tools["search_core_memories"]["input_schema"]["properties"]["limit"]["maximum"] == 20
    assert set(tools["save_core_memory"]["input_schema"]["required"]) == {
        "memory_key",
        "content",
        "category",
        "scope_type",
    }


def test_the_openapi_document_shows_each_tool_with_its_body(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]

    assert {p.removeprefix("/tools/") for p in paths if p.startswith("/tools/")} == ALL_TOOLS
    save = paths["/tools/save_core_memory"]["post"]
    assert save["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("SaveBody")


# -- identity, body, then policy ---------------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_a_tool_call_without_a_valid_token_is_401(client: TestClient, tool: str) -> None:
    assert client.post(f"/tools/{tool}", json=BODIES[tool]).status_code == 401
    bad = {"Authorization": "Bearer not-a-token"}
    assert client.post(f"/tools/{tool}", json=BODIES[tool], headers=bad).status_code == 401


def test_an_unknown_tool_is_404_after_the_identity_check(client: TestClient, agent: Any) -> None:
    assert client.post("/tools/drop_everything", json={}).status_code == 401
    assert call(client, agent(), "drop_everything").status_code == 404


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
@pytest.mark.parametrize(
    "extra",
    [{"user_id": "mallory"}, {"workspace_type": "teaching"}, {"workspace": "teaching"}],
)
def test_a_body_cannot_name_a_user_or_a_workspace(
    client: TestClient, agent: Any, tool: str, extra: dict[str, str]
) -> None:
    response = call(client, agent(), tool, **BODIES[tool], **extra)

    assert response.status_code == 422
    body = response.json()
    assert isinstance(body["detail"], str)
    assert any(next(iter(extra)) in e["field"] for e in body["errors"])


@pytest.mark.parametrize(
    ("tool", "body"),
    [
        ("search_core_memories", {"query": "x", "limit": 21}),
        ("search_core_memories", {"query": "x", "limit": 0}),
        ("search_core_memories", {"query": ""}),
        ("search_core_memories", {"query": "x", "category": "secret"}),
        ("search_core_memories", {"query": "x", "min_relevance": 1.5}),
        ("search_core_memories", {"query": "x", "min_relevance": -0.1}),
        ("list_core_memories", {"scope_type": "project"}),
        ("save_core_memory", {**SAVE, "scope_type": "learning"}),
        ("save_core_memory", {**SAVE, "memory_key": "!!!"}),
        ("update_core_memory", {"memory_id": MISSING}),
        ("update_core_memory", {"memory_id": "nope", "content": "x"}),
        ("forget_core_memory", {}),
        ("propose_core_memory", {"content": "x", "category": "fact", "scope_type": "global"}),
    ],
)
def test_an_invalid_body_is_422(
    client: TestClient, agent: Any, tool: str, body: dict[str, Any]
) -> None:
    response = call(client, agent(), tool, **body)

    assert response.status_code == 422
    assert isinstance(response.json()["detail"], str)


def test_validation_comes_before_the_policy(client: TestClient, agent: Any) -> None:
    denied_turn = agent(workspace=None, mode="isolated")

    assert call(client, denied_turn, "search_core_memories", query="x", limit=99).status_code == 422
    secret = {**SAVE, "content": "my password is hunter2hunter2"}
    response = call(client, agent(mode="no_write"), "save_core_memory", **secret)
    assert response.status_code == 422 and response.json()["reason"] == "sensitive_content"


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_a_turn_without_a_workspace_is_403_workspace_required(
    client: TestClient, agent: Any, tool: str
) -> None:
    response = call(client, agent(workspace=None), tool, **BODIES[tool])

    assert response.status_code == 403
    assert response.json()["reason"] == "workspace_required"


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_isolated_mode_denies_every_tool(client: TestClient, agent: Any, tool: str) -> None:
    response = call(client, agent(mode="isolated"), tool, **BODIES[tool])

    assert response.status_code == 403
    assert response.json()["reason"] == "isolated_mode"


@pytest.mark.parametrize("tool", sorted(WRITE_TOOLS))
def test_no_write_mode_denies_writes_before_looking_at_the_memory(
    client: TestClient, agent: Any, tool: str
) -> None:
    response = call(client, agent(mode="no_write"), tool, **BODIES[tool])

    assert response.status_code == 403
    assert response.json()["reason"] == "no_write_mode"


def test_no_write_mode_still_reads(client: TestClient, agent: Any, auth: Auth) -> None:
    remember(client, auth)
    turn = agent(mode="no_write")

    assert call(client, turn, "search_core_memories", query="examples").json()["items"]
    assert call(client, turn, "list_core_memories").json()["items"]


def test_a_tools_claim_limits_the_turn_to_the_tools_it_names(
    client: TestClient, agent: Any
) -> None:
    turn = agent(tools=["search_core_memories"])

    assert call(client, turn, "search_core_memories", query="x").status_code == 200
    response = call(client, turn, "list_core_memories")
    assert response.status_code == 403 and response.json()["reason"] == "tool_not_allowed"


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_saved_memory_off_denies_every_tool(
    client: TestClient, agent: Any, ledger: MemoryLedger, tool: str
) -> None:
    ledger.change_settings("alice", saved_memory_enabled=False)

    response = call(client, agent(), tool, **BODIES[tool])

    assert response.status_code == 403 and response.json()["reason"] == "memory_disabled"
    assert call(client, agent("bob"), "list_core_memories").status_code == 200


def test_auto_extract_off_denies_only_propose(
    client: TestClient, agent: Any, ledger: MemoryLedger
) -> None:
    ledger.change_settings("alice", auto_extract_enabled=False)

    response = call(client, agent(), "propose_core_memory", **SAVE)
    assert response.status_code == 403 and response.json()["reason"] == "auto_extract_disabled"
    assert call(client, agent(), "save_core_memory", **SAVE).json()["status"] == "created"


def test_a_denial_is_counted_and_logged_without_content(
    client: TestClient, agent: Any, services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memledger.tools"):
        call(client, agent(mode="no_write"), "save_core_memory", **SAVE)

    denials = services.metrics.denials.labels("no_write_mode")._value.get()
    assert denials == 1
    [record] = [r for r in caplog.records if "memory.policy_denied" in r.getMessage()]
    assert "save_core_memory" in record.getMessage() and "no_write_mode" in record.getMessage()
    assert record.user_id == "alice" and record.request_id  # type: ignore[attr-defined]
    assert SAVE["content"] not in record.getMessage()


def test_tool_calls_are_timed(client: TestClient, agent: Any, services: Services) -> None:
    call(client, agent(), "list_core_memories")
    call(client, agent(mode="isolated"), "list_core_memories")

    histogram = services.metrics.tool_latency.labels("list_core_memories")
    assert histogram._sum.get() > 0  # type: ignore[attr-defined]
    samples = services.metrics.registry.get_sample_value(
        "memledger_tool_seconds_count", {"tool": "list_core_memories"}
    )
    assert samples == 2


# -- save_core_memory --------------------------------------------------------------------------


def test_save_creates_an_explicit_memory_changed_via_agent_tool(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    response = call(client, agent(), "save_core_memory", **{**SAVE, "scope_type": "workspace"})

    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "created" and result.get("candidate") is None
    memory = result["memory"]
    assert (memory["scope_type"], memory["workspace_type"]) == ("workspace", "learning")
    assert memory["source_type"] == "explicit" and memory["revision"] == 1
    versions = client.get(f"/me/core-memories/{memory['memory_id']}/versions", headers=auth())
    assert versions.json()["items"][0]["changed_via"] == "agent_tool"


def test_saving_the_same_content_again_is_unchanged(client: TestClient, agent: Any) -> None:
    first = call(client, agent(), "save_core_memory", **SAVE).json()["memory"]
    again = call(
        client,
        agent(),
        "save_core_memory",
        **{**SAVE, "content": " i prefer EXAMPLES before definitions. "},
    ).json()

    assert again["status"] == "unchanged"
    assert again["memory"]["memory_id"] == first["memory_id"] and again["memory"]["revision"] == 1


def test_saving_the_same_content_confirms_a_memory_due_for_review(
    client: TestClient, agent: Any, auth: Auth, clock: Any
) -> None:
    remember(client, auth, review_after=(clock.now - timedelta(days=1)).isoformat())

    again = call(client, agent(), "save_core_memory", **SAVE).json()

    assert again["status"] == "unchanged"
    assert again["memory"]["last_confirmed_at"] is not None


def test_a_new_value_for_a_taken_key_keeps_the_old_one_and_proposes_a_replacement(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    old = remember(client, auth)
    changed = {**SAVE, "content": "Definitions first, then examples"}

    result = call(client, agent(), "save_core_memory", **changed).json()

    assert result["status"] == "candidate_created" and result.get("memory") is None
    candidate = result["candidate"]
    assert candidate["operation"] == "replace" and candidate["status"] == "pending"
    assert candidate["target_memory_id"] == old["memory_id"]
    assert candidate["expected_revision"] == 1
    assert candidate["proposed_content"] == changed["content"]
    kept = client.get(f"/me/core-memories/{old['memory_id']}", headers=auth()).json()
    assert kept["content"] == old["content"] and kept["revision"] == 1
    repeat = call(client, agent(), "save_core_memory", **changed).json()
    assert repeat["status"] == "candidate_created"
    assert repeat["candidate"]["candidate_id"] == candidate["candidate_id"]


def test_saving_a_replacement_the_user_rejected_leaves_the_memory_unchanged(
    client: TestClient, agent: Any, auth: Auth, ledger: MemoryLedger
) -> None:
    remember(client, auth)
    changed = {**SAVE, "content": "Definitions first, then examples"}
    candidate = call(client, agent(), "save_core_memory", **changed).json()["candidate"]
    ledger.reject_candidate("alice", candidate["candidate_id"])

    again = call(client, agent(), "save_core_memory", **changed).json()

    assert (again["status"], again["candidate"]) == ("unchanged", None)
    assert again["memory"]["content"] == SAVE["content"]


def test_save_in_workspace_scope_uses_the_tokens_workspace(client: TestClient, agent: Any) -> None:
    body = {**SAVE, "scope_type": "workspace"}
    learning = call(client, agent(workspace="learning"), "save_core_memory", **body).json()
    research = call(client, agent(workspace="research"), "save_core_memory", **body).json()

    assert learning["memory"]["workspace_type"] == "learning"
    assert research["status"] == "created" and research["memory"]["workspace_type"] == "research"


# -- update_core_memory ------------------------------------------------------------------------


def test_update_makes_a_new_revision_via_agent_tool(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    memory = remember(client, auth)

    result = call(
        client,
        agent(),
        "update_core_memory",
        memory_id=memory["memory_id"],
        content="Examples, then definitions",
        category="constraint",
    ).json()

    assert result["status"] == "updated"
    assert result["memory"]["revision"] == 2 and result["memory"]["category"] == "constraint"
    versions = client.get(f"/me/core-memories/{memory['memory_id']}/versions", headers=auth())
    assert [v["changed_via"] for v in versions.json()["items"]] == ["user_api", "agent_tool"]


def test_update_with_the_same_content_is_unchanged(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    memory = remember(client, auth)

    result = call(
        client,
        agent(),
        "update_core_memory",
        memory_id=memory["memory_id"],
        content=SAVE["content"],
    ).json()

    assert result["status"] == "unchanged" and result["memory"]["revision"] == 1


def _invisible_memories(client: TestClient, auth: Auth) -> dict[str, str]:
    """Memories of alice an agent in `learning` must not see, and one of bob's."""
    teaching = remember(client, auth, scope_type="workspace", workspace_type="teaching")
    suppressed = remember(client, auth, memory_key="hidden")
    client.post(f"/me/core-memories/{suppressed['memory_id']}/suppress", headers=auth())
    bobs = remember(client, auth, user="bob")
    return {
        "other workspace": teaching["memory_id"],
        "suppressed": suppressed["memory_id"],
        "other user": bobs["memory_id"],
        "no such memory": MISSING,
    }


@pytest.mark.parametrize("tool", ["update_core_memory", "forget_core_memory"])
def test_a_memory_the_agent_cannot_see_is_404_and_untouched(
    client: TestClient, agent: Any, auth: Auth, tool: str
) -> None:
    for case, memory_id in _invisible_memories(client, auth).items():
        body = {
            "memory_id": memory_id,
            **({"content": "x"} if tool == "update_core_memory" else {}),
        }
        response = call(client, agent(), tool, **body)
        assert response.status_code == 404, case
        assert response.json() == {"detail": "not found"}, case
    teaching = client.get("/me/core-memories", headers=auth()).json()["items"]
    assert {m["content"] for m in teaching} == {SAVE["content"]}


def test_an_expired_memory_is_404_to_update(
    client: TestClient, agent: Any, auth: Auth, clock: Any
) -> None:
    memory = remember(client, auth, expires_at=(clock.now + timedelta(hours=1)).isoformat())
    clock.advance(hours=2)

    response = call(
        client, agent(), "update_core_memory", memory_id=memory["memory_id"], content="x"
    )

    assert response.status_code == 404


# -- forget_core_memory ------------------------------------------------------------------------


def test_forget_forgets_and_then_the_memory_is_410(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    memory = remember(client, auth)

    result = call(client, agent(), "forget_core_memory", memory_id=memory["memory_id"])

    assert result.status_code == 200 and result.json() == {"status": "forgotten"}
    assert client.get(f"/me/core-memories/{memory['memory_id']}", headers=auth()).status_code == 410
    again = call(client, agent(), "forget_core_memory", memory_id=memory["memory_id"])
    assert again.status_code == 410 and again.json()["reason"] == "forgotten"
    update = call(client, agent(), "update_core_memory", memory_id=memory["memory_id"], content="x")
    assert update.status_code == 410


def test_a_forgotten_memory_of_another_workspace_stays_404(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    memory = remember(client, auth, scope_type="workspace", workspace_type="teaching")
    call(client, agent(workspace="teaching"), "forget_core_memory", memory_id=memory["memory_id"])

    response = call(client, agent(), "forget_core_memory", memory_id=memory["memory_id"])

    assert response.status_code == 404


# -- propose_core_memory -----------------------------------------------------------------------


def test_propose_creates_a_create_candidate_and_a_repeat_is_a_duplicate(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    body = {**SAVE, "scope_type": "workspace", "source_conversation_id": "conv-1"}

    first = call(client, agent(), "propose_core_memory", **body).json()
    again = call(client, agent(), "propose_core_memory", **body).json()

    assert first["status"] == "candidate_created"
    candidate = first["candidate"]
    assert candidate["operation"] == "create" and candidate["target_memory_id"] is None
    assert candidate["proposed_workspace_type"] == "learning"
    assert candidate["source_conversation_id"] == "conv-1"
    assert again["status"] == "duplicate"
    assert again["candidate"]["candidate_id"] == candidate["candidate_id"]
    assert client.get("/me/core-memories", headers=auth()).json()["items"] == []


def test_propose_for_a_taken_key_proposes_a_replacement(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    old = remember(client, auth)

    result = call(
        client, agent(), "propose_core_memory", **{**SAVE, "content": "Definitions first"}
    ).json()

    assert result["status"] == "candidate_created"
    assert result["candidate"]["operation"] == "replace"
    assert result["candidate"]["target_memory_id"] == old["memory_id"]


def test_proposing_what_is_already_remembered_is_a_duplicate_without_candidate(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    remember(client, auth)

    result = call(client, agent(), "propose_core_memory", **SAVE).json()

    assert result == {"status": "duplicate", "candidate": None}


def test_proposing_what_the_user_rejected_is_previously_rejected(
    client: TestClient, agent: Any, ledger: MemoryLedger
) -> None:
    candidate = call(client, agent(), "propose_core_memory", **SAVE).json()["candidate"]
    ledger.reject_candidate("alice", candidate["candidate_id"])

    result = call(client, agent(), "propose_core_memory", **SAVE).json()

    assert result == {"status": "previously_rejected", "candidate": None}


# -- list_core_memories ------------------------------------------------------------------------


def test_list_shows_active_unexpired_memories_of_the_visible_scopes_only(
    client: TestClient, agent: Any, auth: Auth, clock: Any
) -> None:
    visible = {
        remember(client, auth, memory_key="g")["memory_id"],
        remember(client, auth, memory_key="w", scope_type="workspace", workspace_type="learning")[
            "memory_id"
        ],
    }
    _invisible_memories(client, auth)
    remember(
        client, auth, memory_key="soon", expires_at=(clock.now + timedelta(hours=1)).isoformat()
    )
    clock.advance(hours=2)

    listed = call(client, agent(), "list_core_memories").json()["items"]
    only_global = call(client, agent(), "list_core_memories", scope_type="global").json()["items"]
    only_workspace = call(client, agent(), "list_core_memories", scope_type="workspace").json()[
        "items"
    ]

    assert {m["memory_id"] for m in listed} == visible
    assert all(m["status"] == "active" for m in listed)
    assert [m["memory_key"] for m in only_global] == ["g"]
    assert [m["memory_key"] for m in only_workspace] == ["w"]


# -- search_core_memories ----------------------------------------------------------------------


def test_search_returns_relevant_visible_memories_with_token_counts(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    remember(client, auth, memory_key="style", content="我更喜欢先看例子再看定义。")
    remember(client, auth, memory_key="lang", content="I write Python for data analysis",
             category="background")  # fmt: skip
    remember(client, auth, memory_key="secret_plan", content="例子 in teaching only",
             scope_type="workspace", workspace_type="teaching")  # fmt: skip

    result = call(client, agent(), "search_core_memories", query="例子").json()

    [item] = result["items"]
    assert item["memory_key"] == "style" and item["content"] == "我更喜欢先看例子再看定义。"
    assert set(item) == {
        "memory_id",
        "memory_key",
        "content",
        "category",
        "scope_type",
        "workspace_type",
        "source_type",
        "updated_at",
        "tokens",
        "relevance",
    }
    assert item["tokens"] > 0 and result["total_tokens"] == item["tokens"]


def test_search_with_no_match_returns_no_items(
    client: TestClient, agent: Any, auth: Auth, services: Services
) -> None:
    remember(client, auth)

    result = call(client, agent(), "search_core_memories", query="weather tomorrow").json()

    assert result == {"items": [], "total_tokens": 0}
    assert services.metrics.searches.labels("empty")._value.get() == 1


def test_the_workspace_memory_hides_the_global_one_with_the_same_key(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    remember(client, auth, content="Answer in English please")
    local = remember(client, auth, content="Answer in Chinese please", scope_type="workspace",
                     workspace_type="learning")  # fmt: skip

    items = call(client, agent(), "search_core_memories", query="answer").json()["items"]
    elsewhere = call(client, agent(workspace="research"), "search_core_memories", query="answer")

    assert [i["memory_id"] for i in items] == [local["memory_id"]]
    assert [i["content"] for i in elsewhere.json()["items"]] == ["Answer in English please"]


def test_search_respects_the_limit_the_category_and_the_budgets(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    for i in range(8):
        remember(client, auth, memory_key=f"note_{i}", content=f"python note {i} " + "word " * 180,
                 category="fact" if i % 2 else "preference")  # fmt: skip

    default = call(client, agent(), "search_core_memories", query="python").json()
    two = call(client, agent(), "search_core_memories", query="python", limit=2).json()
    facts = call(
        client, agent(), "search_core_memories", query="python", category="fact", limit=20
    ).json()

    assert 1 <= len(default["items"]) <= 5 and default["total_tokens"] <= 600
    assert all(i["tokens"] <= 160 and i["content"].endswith("…") for i in default["items"])
    assert default["total_tokens"] == sum(i["tokens"] for i in default["items"])
    assert len(two["items"]) == 2
    assert facts["items"] and {i["category"] for i in facts["items"]} == {"fact"}


def test_search_skips_expired_memories(
    client: TestClient, agent: Any, auth: Auth, clock: Any
) -> None:
    remember(client, auth, expires_at=(clock.now + timedelta(hours=1)).isoformat())
    found = call(client, agent(), "search_core_memories", query="examples").json()["items"]
    clock.advance(hours=2)

    gone = call(client, agent(), "search_core_memories", query="examples").json()["items"]

    assert len(found) == 1 and gone == []


def test_search_items_carry_their_relevance_and_min_relevance_filters_them(
    client: TestClient, agent: Any, auth: Auth
) -> None:
    remember(client, auth, memory_key="style", content="I prefer examples first")
    remember(client, auth, memory_key="pets", content="My cat prefers the sofa")
    turn = agent()

    items = call(client, turn, "search_core_memories", query="examples first").json()["items"]
    every = call(client, turn, "search_core_memories", query="prefer", min_relevance=0).json()

    assert items and all(0 <= i["relevance"] <= 1 for i in items)
    assert items[0]["memory_key"] == "style"
    relevance = [i["relevance"] for i in every["items"]]
    assert len(relevance) == 2 and relevance == sorted(relevance, reverse=True)
    above = call(client, turn, "search_core_memories", query="prefer", min_relevance=0.99).json()
    assert all(i["relevance"] >= 0.99 for i in above["items"])
    assert [i for i in every["items"] if i["relevance"] >= 0.99] == above["items"]
