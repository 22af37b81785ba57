"""`GET /tools?format=openai`: strict function-calling definitions, and calls shaped by them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient

from api.schemas.function_calling import strict_parameters
from domain.model.values import MAX_CONTENT_CHARS

Auth = Callable[..., dict[str, str]]

# What strict mode accepts (OpenAI structured outputs and the subset other providers enforce).
STRICT_KEYWORDS = {"type", "description", "properties", "required", "additionalProperties"}
STRICT_KEYWORDS |= {"enum", "const", "anyOf", "items", "$defs", "$ref"}


def nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node, the root included."""
    if isinstance(schema, dict):
        yield schema
        for key in ("properties", "$defs"):
            for each in schema.get(key, {}).values():
                yield from nodes(each)
        for each in schema.get("anyOf", []):
            yield from nodes(each)
        if "items" in schema:
            yield from nodes(schema["items"])


@pytest.fixture
def functions(client: TestClient, auth: Auth) -> dict[str, dict[str, Any]]:
    response = client.get("/tools", params={"format": "openai"}, headers=auth())
    assert response.status_code == 200, response.text
    return {f["function"]["name"]: f["function"] for f in response.json()}


def test_the_default_format_stays_the_contracts(client: TestClient, auth: Auth) -> None:
    default = client.get("/tools", headers=auth()).json()
    assert client.get("/tools", params={"format": "default"}, headers=auth()).json() == default
    assert all(set(tool) == {"name", "description", "input_schema"} for tool in default)
    refused = client.get("/tools", params={"format": "yaml"}, headers=auth())
    assert refused.status_code == 422
    assert client.get("/tools", params={"format": "openai"}).status_code == 401


def test_every_tool_is_a_strict_function_with_the_same_name_and_description(
    client: TestClient, auth: Auth
) -> None:
    default = client.get("/tools", headers=auth()).json()
    listed = client.get("/tools", params={"format": "openai"}, headers=auth()).json()

    assert [entry["type"] for entry in listed] == ["function"] * 6
    assert [
        (f["function"]["name"], f["function"]["description"], f["function"]["strict"])
        for f in listed
    ] == [(t["name"], t["description"], True) for t in default]


def test_the_strict_rules_hold_at_every_level(functions: dict[str, dict[str, Any]]) -> None:
    for name, function in functions.items():
        for node in nodes(function["parameters"]):
            assert set(node) <= STRICT_KEYWORDS, (name, node)
            if node.get("type") == "object":
                assert node["additionalProperties"] is False, name
                assert node["required"] == list(node["properties"]), name
        jsonschema.Draft202012Validator.check_schema(function["parameters"])


def test_optional_fields_are_nullable_and_their_dropped_constraints_are_described(
    functions: dict[str, dict[str, Any]],
) -> None:
    search = functions["search_core_memories"]["parameters"]["properties"]
    assert search["limit"]["type"] == ["integer", "null"]
    assert "from 1 to 20" in search["limit"]["description"]
    assert "null means 5" in search["limit"]["description"]
    assert {"type": "null"} in search["category"]["anyOf"]
    assert search["query"]["type"] == "string"  # required: not nullable
    assert "1 to 500 characters" in search["query"]["description"]
    update = functions["update_core_memory"]["parameters"]["properties"]
    assert "format: uuid" in update["memory_id"]["description"]
    assert f"1 to {MAX_CONTENT_CHARS} characters" in update["content"]["description"]


def test_the_rewrite_leaves_the_input_schema_unchanged() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "default": 3, "minimum": 1}},
        "required": [],
    }
    before = repr(schema)
    assert strict_parameters(schema)["properties"]["n"] == {
        "type": ["integer", "null"],
        "description": "at least 1; null means 3",
    }
    assert repr(schema) == before


@pytest.mark.integration
def test_a_strict_shaped_call_with_nulls_succeeds(
    client: TestClient, auth: Auth, functions: dict[str, dict[str, Any]]
) -> None:
    agent = auth("alice", workspace="learning")
    calls: list[tuple[str, dict[str, Any]]] = [
        (
            "save_core_memory",
            {
                "memory_key": "style",
                "content": "examples first",
                "category": "preference",
                "scope_type": "global",
            },
        ),
        (
            "search_core_memories",
            {"query": "examples", "category": None, "limit": None, "min_relevance": None},
        ),
        ("list_core_memories", {"scope_type": None}),
        (
            "propose_core_memory",
            {
                "memory_key": "goal",
                "content": "learn Rust",
                "category": "goal",
                "scope_type": "workspace",
                "source_conversation_id": None,
            },
        ),
    ]
    answers = {}
    for name, arguments in calls:
        jsonschema.validate(arguments, functions[name]["parameters"])  # what a model may send
        response = client.post(f"/tools/{name}", json=arguments, headers=agent)
        assert response.status_code == 200, (name, response.text)
        answers[name] = response.json()

    assert len(answers["search_core_memories"]["items"]) == 1  # null limit: the default
    memory_id = answers["save_core_memory"]["memory"]["memory_id"]
    update = {"memory_id": memory_id, "content": None, "category": "fact"}
    jsonschema.validate(update, functions["update_core_memory"]["parameters"])
    updated = client.post("/tools/update_core_memory", json=update, headers=agent)
    assert updated.status_code == 200, updated.text
    assert updated.json()["memory"]["category"] == "fact"
