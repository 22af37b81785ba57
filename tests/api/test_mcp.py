"""The agent tools over MCP (Streamable HTTP at /mcp), driven by the official `mcp` client
against a running server: the same tools, schemas, results, policy and audit as /tools/*."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from api.access_log import AccessLog
from api.app import create_app
from api.services import Services
from api.tokens import mint_token
from domain.ledger.ledger import MemoryLedger
from retrieval.cache import QueryCache
from tests.api.mcp_server import mcp_session, result_of, serving
from tests.conftest import JWT_SECRET

pytestmark = pytest.mark.integration

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def url(services: Services, ledger: MemoryLedger) -> Iterator[str]:
    """The app as `serve` builds it (access log, search cache) on a loopback port."""
    services.access_log = AccessLog(ledger, interval=0.01)
    services.search_cache = QueryCache(ttl=60)
    with serving(create_app(services)) as base:
        yield base


def token(user: str = "alice", workspace: str | None = "learning", **claims: Any) -> str:
    return mint_token(JWT_SECRET, user, workspace=workspace, **claims)


def http(base: str, bearer: str | None = None) -> httpx2.Client:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return httpx2.Client(base_url=base, headers=headers, timeout=30.0, trust_env=False)


def tool_over_http(base: str, bearer: str, name: str, **body: Any) -> httpx2.Response:
    with http(base, bearer) as client:
        return client.post(f"/tools/{name}", json=body)


def call(base: str, bearer: str, name: str, request_id: str | None = None, **body: Any) -> Any:
    """One MCP tool call: (is_error, structured content)."""

    async def run(client: Client) -> Any:
        return result_of(await client.call_tool(name, body))

    return mcp_session(base, bearer, run, request_id=request_id)


def audit(base: str, services: Services) -> list[Any]:
    assert services.access_log is not None and services.access_log.flush()
    with http(base, mint_token(JWT_SECRET, "audrey", roles=["auditor"])) as client:
        response = client.get("/audit/events", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return response.json()["items"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_initialise_and_list_the_same_tools_as_get_tools(url: str, mode: str) -> None:
    async def run(client: Client) -> Any:
        listed = await client.list_tools()
        return client.server_info, client.server_capabilities, listed.tools

    info, capabilities, tools = mcp_session(url, token(), run, mode=mode)

    assert info is None or info.name == "memledger"
    assert capabilities.tools is not None
    with http(url, token()) as client:
        specs = client.get("/tools").json()
    assert [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ] == specs
    assert {t.name: t.annotations.read_only_hint for t in tools if t.annotations} == {
        "search_core_memories": True,
        "list_core_memories": True,
        "save_core_memory": None,
        "update_core_memory": None,
        "forget_core_memory": None,
        "propose_core_memory": None,
    }


def test_each_tool_answers_like_its_http_endpoint(url: str, services: Services) -> None:
    agent = token()
    save = {
        "memory_key": "explanation_style",
        "content": "I prefer worked examples before definitions",
        "category": "preference",
        "scope_type": "global",
    }

    failed, saved = call(url, agent, "save_core_memory", **save)
    assert not failed and saved["status"] == "created"
    memory = saved["memory"]
    again = tool_over_http(url, agent, "save_core_memory", **save)
    assert again.json() == {"status": "unchanged", "memory": memory, "candidate": None}

    for name, body in [
        ("list_core_memories", {}),
        ("list_core_memories", {"scope_type": "global"}),
        ("search_core_memories", {"query": "worked examples"}),
        ("search_core_memories", {"query": "nothing like this at all", "limit": 2}),
    ]:
        over_http = tool_over_http(url, agent, name, **body)
        assert over_http.status_code == 200
        assert call(url, agent, name, **body) == (False, over_http.json()), name
    assert call(url, agent, "list_core_memories")[1]["items"] == [memory]

    failed, proposed = call(
        url, agent, "propose_core_memory", **save | {"memory_key": "goal", "category": "goal"}
    )
    assert not failed and proposed["status"] == "candidate_created"
    repeat = tool_over_http(
        url, agent, "propose_core_memory", **save | {"memory_key": "goal", "category": "goal"}
    )
    assert repeat.json()["candidate"] == proposed["candidate"]

    failed, updated = call(
        url, agent, "update_core_memory", memory_id=memory["memory_id"], content="Definitions first"
    )
    assert not failed and updated["status"] == "updated"
    assert (updated["memory"]["revision"], updated["memory"]["content"]) == (2, "Definitions first")
    with http(url, token()) as owner:
        current = owner.get(f"/me/core-memories/{memory['memory_id']}").json()
    assert updated["memory"] == current

    assert call(url, agent, "forget_core_memory", memory_id=memory["memory_id"]) == (
        False,
        {"status": "forgotten"},
    )
    failed, gone = call(url, agent, "forget_core_memory", memory_id=memory["memory_id"])
    assert failed and (gone["status"], gone["reason"]) == (410, "forgotten")
    over_http = tool_over_http(url, agent, "forget_core_memory", memory_id=memory["memory_id"])
    assert gone == {"status": 410, **over_http.json()}


def test_the_calls_leave_the_same_access_records_with_the_mcp_request_id(
    url: str, services: Services
) -> None:
    agent = token()
    body = {"memory_key": "k", "content": "I like tea", "category": "preference"}
    call(url, agent, "save_core_memory", **body, scope_type="global")
    failed, found = call(url, agent, "search_core_memories", "mcp-search-1", query="tea")
    assert not failed and len(found["items"]) == 1

    rows = [r for r in audit(url, services) if r["event_type"] == "memory.search"]
    assert [(r["request_id"], r["user_id"], r["memory_id"]) for r in rows] == [
        ("mcp-search-1", "alice", found["items"][0]["memory_id"])
    ]


@pytest.mark.parametrize(
    ("claims", "tool", "body", "reason"),
    [
        ({"mode": "isolated"}, "search_core_memories", {"query": "x"}, "isolated_mode"),
        ({"mode": "isolated"}, "list_core_memories", {}, "isolated_mode"),
        (
            {"mode": "no_write"},
            "save_core_memory",
            {"memory_key": "k", "content": "c", "category": "fact", "scope_type": "global"},
            "no_write_mode",
        ),
        (
            {"mode": "no_write"},
            "forget_core_memory",
            {"memory_id": str(uuid.uuid4())},
            "no_write_mode",
        ),
        ({"tools": ["search_core_memories"]}, "list_core_memories", {}, "tool_not_allowed"),
        ({"workspace": None}, "search_core_memories", {"query": "x"}, "workspace_required"),
    ],
)
def test_every_policy_denial_is_a_tool_error_with_the_contracts_reason(
    url: str, services: Services, claims: dict[str, Any], tool: str, body: Any, reason: str
) -> None:
    agent = token(**({"workspace": "teaching"} | claims))

    failed, error = call(url, agent, tool, "mcp-denied", **body)

    assert failed
    assert (error["status"], error["reason"]) == (403, reason)
    assert error["detail"] == tool_over_http(url, agent, tool, **body).json()["detail"]
    denials = [r for r in audit(url, services) if r["event_type"] == "memory.policy_denied"]
    assert len(denials) == 2  # one for each call, over MCP and over HTTP
    assert ("mcp-denied", "alice") in [(r["request_id"], r["user_id"]) for r in denials]


def test_settings_deny_tools_over_mcp_too(url: str) -> None:
    with http(url, token(workspace=None)) as owner:
        owner.patch("/me/memory-settings", json={"auto_extract_enabled": False})
    body = {"memory_key": "k", "content": "c", "category": "fact", "scope_type": "global"}

    failed, error = call(url, token(), "propose_core_memory", **body)

    assert failed and error["reason"] == "auto_extract_disabled"


def test_invalid_arguments_are_a_tool_error_with_the_field_errors(url: str) -> None:
    failed, error = call(url, token(), "search_core_memories", query="x", user_id="bob")

    assert failed and error["status"] == 422
    assert [e["field"] for e in error["errors"]] == ["user_id"]


def test_an_unknown_tool_name_never_reaches_another_route(url: str) -> None:
    for name in ["no_such_tool", "../../me/core-memories", "%2e%2e/me/memory-settings"]:
        failed, error = call(url, token(), name, memory_key="k", content="c")
        assert failed and error["status"] == 404, name
    with http(url, token()) as owner:
        assert owner.get("/me/core-memories").json()["items"] == []


@pytest.mark.parametrize("bearer", [None, "not-a-token", mint_token("wrong-secret" * 3, "alice")])
def test_a_request_without_a_valid_token_is_401(url: str, bearer: str | None) -> None:
    with http(url, bearer) as client:
        response = client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json() == {
        "detail": "missing, malformed, expired or wrongly signed bearer token"
    }


def test_the_mcp_client_cannot_connect_without_a_token(url: str) -> None:
    async def run(client: Client) -> None:
        await client.list_tools()

    with pytest.raises(ExceptionGroup) as raised:  # the SDK's task groups wrap its error
        mcp_session(url, None, run)
    assert raised.group_contains(MCPError, depth=None)


def test_a_token_of_another_user_never_sees_the_first_users_memories(url: str) -> None:
    body = {"memory_key": "k", "content": "Alice likes tea", "category": "preference"}
    call(url, token("alice"), "save_core_memory", **body, scope_type="global")

    failed, listed = call(url, token("bob"), "list_core_memories")

    assert not failed and listed["items"] == []


def test_only_post_is_served_and_a_malformed_message_is_a_json_rpc_error(url: str) -> None:
    with http(url, token()) as client:
        for method in ("GET", "DELETE"):  # stateless: no stream to open, no session to end
            refused = client.request(method, "/mcp", headers=MCP_HEADERS, timeout=10)
            assert (refused.status_code, refused.headers["Allow"]) == (405, "POST"), method
        garbled = client.post(
            "/mcp", content=b"{not json", headers=MCP_HEADERS | {"Content-Type": "application/json"}
        )
    assert garbled.status_code == 400
    assert garbled.json()["error"]["code"] == -32700  # JSON-RPC parse error
    with http(url) as anonymous:  # identity is checked first, whatever the method
        assert anonymous.get("/mcp", headers=MCP_HEADERS).status_code == 401


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e309"])
@pytest.mark.parametrize("field", ["limit", "query"])
def test_a_non_finite_number_is_a_tool_error_like_any_invalid_value(
    url: str, number: str, field: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Strict JSON cannot carry NaN or infinity: they reach the tool, which refuses them (422),
    instead of failing the dispatch (a JSON-RPC error, logged at ERROR)."""
    arguments = {"query": '"tea"', "limit": "3"} | {field: number}
    message = (
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_core_memories",'
        f'"arguments":{{"query":{arguments["query"]},"limit":{arguments["limit"]}}}}}}}'
    )
    with http(url, token()) as client:
        answer = client.post(
            "/mcp",
            content=message.encode(),
            headers=MCP_HEADERS | {"Content-Type": "application/json"},
        )

    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True
    error = result["structuredContent"]
    assert error["status"] == 422 and isinstance(error["detail"], str)
    assert [e["field"] for e in error["errors"]] == [field]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_write_over_mcp_answers_its_position(url: str) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "save_core_memory",
            "arguments": {
                "memory_key": "drink",
                "content": "I like green tea",
                "category": "preference",
                "scope_type": "global",
            },
        },
    }
    with http(url, token()) as client:
        answer = client.post("/mcp", json=message, headers=MCP_HEADERS)
        position = answer.headers.get("X-Position")
        assert answer.status_code == 200 and position, answer.headers
        listed = client.post(
            "/mcp",
            json={**message, "params": {"name": "list_core_memories", "arguments": {}}},
            headers=MCP_HEADERS | {"X-Min-Position": position},
        )
    assert "X-Position" not in listed.headers  # a read
    items = listed.json()["result"]["structuredContent"]["items"]
    assert [m["content"] for m in items] == ["I like green tea"]
    with http(url, token()) as client:
        malformed = client.post(
            "/mcp",
            json={**message, "params": {"name": "list_core_memories", "arguments": {}}},
            headers=MCP_HEADERS | {"X-Min-Position": "soon"},
        )
    assert malformed.json()["result"]["structuredContent"]["status"] == 422
