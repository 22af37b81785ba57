"""The OpenAPI document: valid, hand-named operations, bearer security, examples that match
their schemas, every error as the JSON error body it is, Location on 201; and the request
metric's status label, clean JSON logs."""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from api.middleware import JsonFormatter
from api.openapi import OPERATION_IDS
from tests.api.offline import offline_app

Auth = Callable[..., dict[str, str]]
OPEN = {"/healthz", "/readyz", "/metrics"}
"""The operations anyone may call (API_CONTRACT.md, 'Identity'); everything else needs a token."""


@pytest.fixture(scope="module")
def app() -> Any:
    return offline_app()  # the document needs no database


@pytest.fixture(scope="module")
def spec(app: Any) -> dict[str, Any]:
    return json.loads(json.dumps(app.openapi()))  # as served: plain JSON


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), p, op) for p, ops in spec["paths"].items() for m, op in ops.items()]


def test_the_document_passes_the_openapi_validator(spec: dict[str, Any]) -> None:
    validate(spec)  # raises on any error
    assert spec["openapi"].startswith("3.1")


def test_every_operation_is_hand_named_and_unique(app: Any, spec: dict[str, Any]) -> None:
    routes = [r for r in app.routes if isinstance(r, APIRoute) and r.include_in_schema]
    unnamed = [
        (method, r.path_format)
        for r in routes
        for method in r.methods
        if (method, r.path_format) not in OPERATION_IDS
    ]
    assert not unnamed, f"name these operations in api/openapi.py OPERATION_IDS: {unnamed}"
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids)) == len(operations(spec))
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)+", i) for i in ids), ids
    named = {(m, p): op["operationId"] for m, p, op in operations(spec)}
    assert named[("POST", "/me/core-memories")] == "createMemory"
    assert named[("GET", "/me/core-memories")] == "listMemories"
    assert named[("POST", "/tools/search_core_memories")] == "searchCoreMemories"


def test_bearer_security_on_every_protected_operation_only(spec: dict[str, Any]) -> None:
    scheme = spec["components"]["securitySchemes"]["bearer"]
    assert scheme == scheme | {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    for method, path, op in operations(spec):
        if path in OPEN:
            assert "security" not in op, (method, path)
        else:
            assert op.get("security") == [{"bearer": []}], (method, path)
        names = {p["name"].lower() for p in op.get("parameters", [])}
        assert "authorization" not in names  # the scheme, not a header parameter, carries it


def _validator(spec: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator({**schema, "components": spec["components"]})


def test_every_body_and_main_response_has_an_example_that_fits_its_schema(
    spec: dict[str, Any],
) -> None:
    checked = 0
    for method, path, op in operations(spec):
        media = list(op.get("requestBody", {}).get("content", {}).items())
        for status, response in op["responses"].items():
            if status.startswith("2") and status != "204":
                assert response.get("content"), (method, path, status)
                media += list(response["content"].items())
        for media_type, content in media:
            assert "example" in content, (method, path, media_type)
            example, schema = content["example"], content.get("schema", {})
            if media_type == "application/json":
                examples = [example]
            elif media_type == "application/x-ndjson":
                examples = [json.loads(line) for line in example.splitlines()]
            else:
                assert isinstance(example, str)
                continue
            for value in examples:
                errors = list(_validator(spec, schema).iter_errors(value))
                assert not errors, (method, path, media_type, [e.message for e in errors])
            checked += 1
    assert checked >= 40
    for name, schema in spec["components"]["schemas"].items():
        for example in schema.get("examples", []):
            errors = list(
                _validator(spec, {"$ref": f"#/components/schemas/{name}"}).iter_errors(example)
            )
            assert not errors, (name, [e.message for e in errors])


@pytest.mark.integration
def test_every_error_is_documented_as_the_json_error_body_it_is(
    spec: dict[str, Any], client: TestClient, auth: Auth
) -> None:
    documented = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for method, path, op in operations(spec):
        errors = {s: r for s, r in op["responses"].items() if s[0] in "45"}
        assert {"401", "404", "422", "500", "503"} <= set(errors), (method, path)
        for status, response in errors.items():
            assert response["content"] == documented, (method, path, status)
    assert spec["components"]["schemas"]["ErrorBody"]["required"] == ["detail"]
    for answer in (  # one a route answers, one the validation answers, one of the replay's
        client.get(f"/me/core-memories/{uuid.uuid4()}", headers=auth()),
        client.post("/me/core-memories", json={"memory_key": 1}, headers=auth()),
        client.get("/audit/replay", params={"since": "yesterday"}, headers=auth(roles=["auditor"])),
    ):
        assert answer.status_code in (404, 422), answer.text
        assert answer.headers["content-type"] == "application/json"
        errors = list(
            _validator(spec, documented["application/json"]["schema"]).iter_errors(answer.json())
        )
        assert not errors, (answer.request.url, [e.message for e in errors])


def test_every_201_declares_location(spec: dict[str, Any]) -> None:
    created = [(m, p, op) for m, p, op in operations(spec) if "201" in op["responses"]]
    assert [(m, p) for m, p, _ in created] == [("POST", "/me/core-memories")]
    for _, _, op in created:
        assert "Location" in op["responses"]["201"]["headers"]


@pytest.mark.integration
def test_a_created_memory_is_where_location_says(client: TestClient, auth: Auth) -> None:
    body = {
        "memory_key": "tea",
        "content": "green",
        "category": "preference",
        "scope_type": "global",
    }
    created = client.post("/me/core-memories", json=body, headers=auth())
    assert created.status_code == 201
    location = created.headers["location"]
    assert location == f"/me/core-memories/{created.json()['memory_id']}"
    assert client.get(location, headers=auth()).json() == created.json()
    again = client.post("/me/core-memories", json=body, headers=auth())
    assert again.status_code == 200 and "location" not in again.headers


def test_the_docs_pages_use_only_local_assets(app: Any) -> None:
    with TestClient(app) as client:
        for page in ("/docs", "/redoc"):
            answer = client.get(page)
            assert answer.status_code == 200, page  # (was vacuous: a 500 has no assets)
            html = answer.text
            assert not re.search(r"https?://", html), page
            for asset in re.findall(r'(?:src|href)="([^"]+)"', html):
                assert asset.startswith("/"), asset
                assert client.get(asset).status_code == 200, asset


def test_redoc_draws_nothing_from_another_origin(app: Any) -> None:
    with TestClient(app) as client:
        bundle = client.get("/docs-assets/redoc.standalone.js")
        swagger = client.get("/docs-assets/swagger-ui-bundle.js")  # the rest: still static

    assert bundle.status_code == 200 and "javascript" in bundle.headers["content-type"]
    assert "cdn.redoc.ly" not in bundle.text  # the vendor's logo, blocked by the page's CSP
    assert 'src:"data:image/svg+xml,' in bundle.text  # an empty image in its place
    assert swagger.status_code == 200


def test_the_document_names_the_package_and_the_contract_version(app: Any) -> None:
    info = app.openapi()["info"]

    assert info["version"] == version("memledger") == "0.1.0"
    assert info["x-contract-version"] == "1"
    assert "version 1 of the HTTP contract" in info["description"]


@pytest.mark.integration
def test_request_durations_are_labelled_by_route_template_and_status(
    client: TestClient, auth: Auth
) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    assert client.get(f"/me/core-memories/{missing}", headers=auth()).status_code == 404
    assert client.get("/me/core-memories", headers=auth()).status_code == 200
    text = client.get("/metrics").text
    for route, status in (("/me/core-memories/{memory_id}", "404"), ("/me/core-memories", "200")):
        labels = f'method="GET",route="{route}",status="{status}"'
        line = f"memledger_http_request_seconds_count{{{labels}}}"
        assert line in text, line
    assert missing not in text  # the template, never the raw path: bounded label values


def test_json_logs_leave_out_uvicorns_coloured_copy() -> None:
    record = logging.LogRecord(
        "uvicorn.error", logging.INFO, __file__, 1, "Started %s", ("x",), None
    )
    record.color_message = "Started \x1b[1m%s\x1b[0m"
    record.request_id = "r-1"
    line = JsonFormatter().format(record)
    assert "\x1b" not in line and "color_message" not in line
    assert json.loads(line) | {"time": None} == {
        "time": None,
        "level": "INFO",
        "logger": "uvicorn.error",
        "message": "Started x",
        "request_id": "r-1",
    }
