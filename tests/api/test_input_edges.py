"""Hostile input at the HTTP edge (issue 13, points 1 and 7): 401/413/422, never 500 or a stall.

Every string a request carries (body fields, query and path parameters, the headers the API
reads, the token's claims) is checked before anything is stored: control characters and NUL
are 422 (401 in a token), bodies are bounded while they stream, invalid UTF-8 is 422, and the
schemas' limits are the domain's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.credentials import jwt_secret
from api.services import Services
from api.settings import Settings
from domain.ledger.keyring import KeyringError
from domain.model.values import MAX_CONTENT_CHARS, MAX_KEY_CHARS
from tests.conftest import JWT_SECRET

Auth = Callable[..., dict[str, str]]
MISSING = "00000000-0000-4000-8000-000000000000"
CONTROLS = ["\x00", "\x01", "\x1b", "\x7f", "\x85"]
MEMORY = {
    "memory_key": "drink",
    "content": "I like green tea",
    "category": "preference",
    "scope_type": "global",
}

# (method, path, a valid body, the text fields of that body, whether it is an agent tool)
BODIES: list[tuple[str, str, dict[str, Any], list[str], bool]] = [
    ("POST", "/me/core-memories", MEMORY, ["memory_key", "content"], False),
    (
        "PATCH",
        f"/me/core-memories/{MISSING}",
        {"expected_revision": 1, "content": "x"},
        ["content"],
        False,
    ),
    (
        "PUT",
        "/me/memories",
        {k: MEMORY[k] for k in ("memory_key", "content", "category")},
        ["memory_key", "content"],
        False,
    ),
    ("POST", f"/me/memory-candidates/{MISSING}/accept", {"content": "x"}, ["content"], False),
    ("POST", "/tools/search_core_memories", {"query": "tea"}, ["query"], True),
    ("POST", "/tools/save_core_memory", MEMORY, ["memory_key", "content"], True),
    (
        "POST",
        "/tools/update_core_memory",
        {"memory_id": MISSING, "content": "x"},
        ["content"],
        True,
    ),
    (
        "POST",
        "/tools/propose_core_memory",
        {**MEMORY, "source_conversation_id": "conversation-1"},
        ["memory_key", "content", "source_conversation_id"],
        True,
    ),
]
CASES = [
    pytest.param(method, path, body, field, tool, id=f"{method} {path} {field}")
    for method, path, body, fields, tool in BODIES
    for field in fields
]


def send(client: TestClient, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    """Send `body` as ASCII JSON (escapes kept: lone surrogates survive the trip)."""
    return client.request(
        method,
        path,
        content=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json"},
    )


def headers_for(auth: Auth, tool: bool) -> dict[str, str]:
    return auth("alice", workspace="learning") if tool else auth("alice")


def assert_422(response: Any, field: str | None = None) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert isinstance(body["detail"], str) and body["errors"]
    if field is not None:
        assert any(field in e["field"] for e in body["errors"]), body


# -- body fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body", "field", "tool"), CASES)
def test_a_control_character_or_lone_surrogate_in_any_text_field_is_422(
    client: TestClient,
    auth: Auth,
    method: str,
    path: str,
    body: dict[str, Any],
    field: str,
    tool: bool,
) -> None:
    for bad in [*CONTROLS, "\ud800"]:
        response = send(
            client, method, path, {**body, field: f"tea{bad}time"}, headers_for(auth, tool)
        )
        assert_422(response, field)


def test_content_keeps_its_newlines_and_tabs(client: TestClient, auth: Auth) -> None:
    body = {**MEMORY, "content": "Tea:\n\tgreen, in the morning\r\n\tblack after noon"}
    response = client.post("/me/core-memories", json=body, headers=auth("alice"))
    assert response.status_code == 201, response.text


def test_a_nul_conversation_id_is_refused_and_stalls_nothing(
    client: TestClient, auth: Auth
) -> None:
    """The issue's reproduction: the candidates projection must never see such an event."""
    agent = auth("alice", workspace="learning")
    bad = {**MEMORY, "source_conversation_id": "c\x00d"}
    assert_422(client.post("/tools/propose_core_memory", json=bad, headers=agent))

    proposed = client.post(
        "/tools/propose_core_memory",
        json={**MEMORY, "source_conversation_id": "conversation-1"},
        headers=agent,
    )
    assert proposed.status_code == 200, proposed.text
    listed = client.get("/me/memory-candidates", headers=auth("alice"))
    assert listed.status_code == 200  # read-your-writes: the projection kept up
    assert [c["source_conversation_id"] for c in listed.json()["items"]] == ["conversation-1"]


@pytest.mark.parametrize("conversation", ["has space", "ünï", "-dash", "x" * 201, ""])
def test_a_conversation_id_outside_the_id_pattern_is_422(
    client: TestClient, auth: Auth, conversation: str
) -> None:
    body = {**MEMORY, "source_conversation_id": conversation}
    response = client.post(
        "/tools/propose_core_memory", json=body, headers=auth("alice", workspace="learning")
    )
    assert_422(response, "source_conversation_id")


# -- query and path parameters -----------------------------------------------------------------


@pytest.mark.parametrize("user_id", ["a\x00b", "a\x1bb", "a b", "x" * 201])
def test_an_audit_user_id_filter_outside_the_id_pattern_is_422(
    client: TestClient, auth: Auth, user_id: str
) -> None:
    response = client.get(
        "/audit/events", params={"user_id": user_id}, headers=auth("audrey", roles=["auditor"])
    )
    assert_422(response, "user_id")


@pytest.mark.parametrize("cursor", ["a\x00b", "abc def", "é", "x" * 501])
def test_a_malformed_cursor_is_422(client: TestClient, auth: Auth, cursor: str) -> None:
    response = client.get("/me/core-memories", params={"cursor": cursor}, headers=auth("alice"))
    assert_422(response, "cursor")


@pytest.mark.parametrize(
    "query", ["status=act%00ive", "category=%00", "scope_type=global%01", "limit=1%00"]
)
def test_control_characters_in_filters_are_422(client: TestClient, auth: Auth, query: str) -> None:
    assert_422(client.get(f"/me/core-memories?{query}", headers=auth("alice")))


@pytest.mark.parametrize("key", ["a%00b", "a%1Bb", "a%7Fb", "k" * (MAX_KEY_CHARS + 1)])
def test_a_legacy_key_in_the_path_is_checked(client: TestClient, auth: Auth, key: str) -> None:
    assert_422(client.delete(f"/me/memories/{key}", headers=auth("alice")))


@pytest.mark.parametrize("path", ["/me/core-memories/a%00b", "/me/memory-candidates/%00/reject"])
def test_a_malformed_id_in_the_path_is_422(client: TestClient, auth: Auth, path: str) -> None:
    method = "POST" if path.endswith("reject") else "GET"
    assert_422(client.request(method, path, headers=auth("alice")))


def test_an_unknown_tool_name_with_nul_is_404(client: TestClient, auth: Auth) -> None:
    response = client.post("/tools/a%00b", json={}, headers=auth("alice", workspace="learning"))
    assert response.status_code == 404


# -- headers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_id", [b"a\x00b", b"a\x01b", b"a b", b"x" * 129, "é".encode(), b"ok\x0b"]
)
def test_an_invalid_request_id_is_replaced_not_echoed(
    client: TestClient, request_id: bytes
) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": request_id})  # type: ignore[dict-item]
    assert response.status_code == 200
    echoed = response.headers["x-request-id"]
    assert echoed.encode() != request_id and len(echoed) == 32 and echoed.isalnum()


def test_a_valid_request_id_is_echoed(client: TestClient) -> None:
    response = client.get("/healthz", headers={"X-Request-ID": "req-42:retry.1"})
    assert response.headers["x-request-id"] == "req-42:retry.1"


@pytest.mark.parametrize("position", ["1\x00", "-1", "x"])
def test_a_malformed_min_position_is_422(client: TestClient, auth: Auth, position: str) -> None:
    response = client.get(
        "/me/core-memories", headers={**auth("alice"), "X-Min-Position": position}
    )
    assert_422(response)


# -- token claims ------------------------------------------------------------------------------


def bearer(**claims: Any) -> dict[str, str]:
    """A token with these claims and a valid `exp` (required: tests/api/test_token_expiry.py)."""
    claims = {"exp": int(time.time()) + 600, **claims}
    return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "a\x00b"},
        {"sub": "a\x1bb"},
        {"sub": "a\nb"},
        {"sub": "a b"},
        {"sub": "x" * 201},
        {"sub": ""},
        {"sub": 7},
        {"sub": "alice", "roles": ["aud\x00itor"]},
        {"sub": "alice", "roles": ["x" * 65]},
        {"sub": "alice", "roles": ["auditor"] * 65},
        {"sub": "alice", "workspace": "learning\x00"},
        {"sub": "alice", "workspace": ["learning"]},
        {"sub": "alice", "mode": "normal\x00"},
        {"sub": "alice", "mode": ["normal"]},
        {"sub": "alice", "tools": ["search_core_memories\x00"]},
        {"sub": "alice", "tools": "search_core_memories"},
        {"sub": "alice", "tools": ["x" * 65]},
    ],
)
def test_a_token_with_a_bad_claim_is_401(client: TestClient, claims: dict[str, Any]) -> None:
    for path in ("/me/core-memories", "/tools", "/audit/events"):
        response = client.get(path, headers=bearer(**claims))
        assert response.status_code == 401, (path, response.text)
        assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize("sub", ["auth0|5f7c8ec7c33c6c004bbafe82", "alice@example.com", "user-1"])
def test_ordinary_subjects_are_accepted(client: TestClient, sub: str) -> None:
    assert client.get("/me/core-memories", headers=bearer(sub=sub)).status_code == 200


# -- body size ---------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_in_the_error_shape(client: TestClient, auth: Auth) -> None:
    body = {**MEMORY, "content": "x" * (70 * 1024)}
    response = client.post("/me/core-memories", json=body, headers=auth("alice"))
    assert response.status_code == 413
    assert isinstance(response.json()["detail"], str)


def test_an_unauthenticated_huge_body_is_413_too(client: TestClient) -> None:
    response = client.post("/tools/save_core_memory", content=b"{" + b" " * (1024 * 1024))
    assert response.status_code == 413
    assert isinstance(response.json()["detail"], str)


def test_a_body_at_the_limit_is_read(services: Services, auth: Auth) -> None:
    with TestClient(create_app(dataclasses.replace(services, max_body_bytes=200))) as small:
        body = json.dumps({"query": "t" * 150}).encode()
        assert len(body) <= 200
        agent = {**auth("alice", workspace="learning"), "Content-Type": "application/json"}
        assert (
            small.post("/tools/search_core_memories", content=body, headers=agent).status_code
            == 200
        )
        over = json.dumps({"query": "t" * 250}).encode()
        assert (
            small.post("/tools/search_core_memories", content=over, headers=agent).status_code
            == 413
        )


def test_the_default_limit_is_64_kib() -> None:
    assert Settings().max_body_bytes == 64 * 1024  # type: ignore[call-arg]


class Upload:
    """An ASGI receive() of a huge body in 64 KiB chunks, counting what the app pulled."""

    def __init__(self, total: int, chunk: int = 64 * 1024) -> None:
        self.left, self.chunk, self.pulled = total, chunk, 0

    async def __call__(self) -> dict[str, Any]:
        size = min(self.chunk, self.left)
        self.left -= size
        self.pulled += size
        return {"type": "http.request", "body": b" " * size, "more_body": self.left > 0}


def call_asgi(
    services: Services, upload: Upload, headers: list[tuple[bytes, bytes]]
) -> list[dict[str, Any]]:
    app = create_app(services)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/tools/save_core_memory",
        "raw_path": b"/tools/save_core_memory",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, upload, send))  # type: ignore[arg-type]
    return sent


def test_a_streamed_body_is_cut_off_at_the_limit_not_read_whole(services: Services) -> None:
    upload = Upload(150 * 1024 * 1024)
    sent = call_asgi(services, upload, [])

    assert sent[0]["status"] == 413
    assert upload.pulled <= 2 * 64 * 1024  # not 150 MB
    assert isinstance(json.loads(sent[1]["body"])["detail"], str)


def test_a_declared_length_over_the_limit_is_refused_before_reading(services: Services) -> None:
    upload = Upload(150 * 1024 * 1024)
    sent = call_asgi(services, upload, [(b"content-length", str(150 * 1024 * 1024).encode())])

    assert sent[0]["status"] == 413
    assert upload.pulled == 0


# -- encoding and limits -----------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b'{"query": "caf\xe9"}', b'{"query": "\xff\xfe"}', b"\xc3("])
def test_invalid_utf8_json_is_422(client: TestClient, auth: Auth, raw: bytes) -> None:
    response = client.post(
        "/tools/search_core_memories",
        content=raw,
        headers={**auth("alice", workspace="learning"), "Content-Type": "application/json"},
    )
    assert_422(response)


def test_deeply_nested_json_is_422_not_400(client: TestClient, auth: Auth) -> None:
    raw = b"[" * 30000 + b"]" * 30000
    response = client.post(
        "/me/core-memories",
        content=raw,
        headers={**auth("alice"), "Content-Type": "application/json"},
    )
    assert_422(response)


@pytest.mark.parametrize(
    ("method", "path", "tool"),
    [
        ("POST", "/me/core-memories", False),
        ("PUT", "/me/memories", False),
        ("POST", "/tools/save_core_memory", True),
    ],
)
def test_content_and_key_limits_are_the_domains(
    client: TestClient, auth: Auth, method: str, path: str, tool: bool
) -> None:
    headers = headers_for(auth, tool)
    body = {**MEMORY, "content": "y" * MAX_CONTENT_CHARS, "memory_key": "k" * MAX_KEY_CHARS}
    if path == "/me/memories":
        body.pop("scope_type")
    assert send(client, method, path, body, headers).status_code in (200, 201)

    too_long = {**body, "content": "y" * (MAX_CONTENT_CHARS + 1)}
    assert_422(send(client, method, path, too_long, headers), "content")
    long_key = {**body, "memory_key": "k" * (MAX_KEY_CHARS + 1)}
    assert_422(send(client, method, path, long_key, headers), "memory_key")


def test_the_published_tool_schemas_say_the_domain_limits(client: TestClient, auth: Auth) -> None:
    tools = {t["name"]: t["input_schema"] for t in client.get("/tools", headers=auth()).json()}

    for name in ("save_core_memory", "propose_core_memory"):
        properties = tools[name]["properties"]
        assert properties["content"]["maxLength"] == MAX_CONTENT_CHARS
        assert properties["memory_key"]["maxLength"] == MAX_KEY_CHARS
    update_content = tools["update_core_memory"]["properties"]["content"]["anyOf"][0]
    assert update_content["maxLength"] == MAX_CONTENT_CHARS
    conversation = tools["propose_core_memory"]["properties"]["source_conversation_id"]
    assert conversation["anyOf"][0]["pattern"]


# -- methods -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/me/core-memories", {"GET", "POST"}),
        (f"/me/core-memories/{MISSING}", {"GET", "PATCH", "DELETE"}),
        ("/me/memories", {"GET", "PUT"}),
        ("/me/memory-settings", {"GET", "PATCH"}),
        ("/tools/save_core_memory", {"POST"}),
        ("/audit/events", {"GET"}),
    ],
)
def test_a_wrong_method_is_405_with_every_method_of_the_path(
    client: TestClient, auth: Auth, path: str, allowed: set[str]
) -> None:
    for method in {"OPTIONS", "PUT", "TRACE", "HEAD"} - allowed:
        response = client.request(method, path, headers=auth("alice"))
        assert response.status_code == 405, (method, response.text)
        assert set(response.headers["allow"].replace(" ", "").split(",")) == allowed
        if method != "HEAD":  # a HEAD answer has no body
            assert isinstance(response.json()["detail"], str)


# -- start-up ----------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", ["", "x", "y" * 31, "é" * 15])
def test_start_up_refuses_a_jwt_secret_under_32_bytes(secret: str) -> None:
    with pytest.raises(KeyringError, match="32 bytes"):
        jwt_secret(Settings(jwt_secret=secret))  # type: ignore[arg-type]


def test_a_32_byte_secret_is_enough() -> None:
    assert jwt_secret(Settings(jwt_secret="z" * 32)) == "z" * 32  # type: ignore[arg-type]


def test_dev_mode_generates_a_long_enough_secret(tmp_path: Any) -> None:
    secret = jwt_secret(Settings(dev=True, data_dir=tmp_path))  # type: ignore[call-arg]
    assert len(secret.encode()) >= 32


def test_a_short_dev_secret_file_is_refused(tmp_path: Any) -> None:
    (tmp_path / "jwt.secret").write_text("short\n")
    with pytest.raises(KeyringError, match="32 bytes"):
        jwt_secret(Settings(dev=True, data_dir=tmp_path))  # type: ignore[call-arg]


def test_413_is_documented_on_every_operation(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert "413" in operation["responses"], (method, path)
