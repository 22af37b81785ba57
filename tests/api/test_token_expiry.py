"""A token's `exp` is required, numeric and within the service's maximum token lifetime
(API_CONTRACT.md, "Identity"): without it, non-numeric, or further ahead: 401 everywhere."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.services import Services
from api.tokens import MAX_TOKEN_LIFETIME, InvalidToken, mint_token, verify_token
from tests.conftest import JWT_SECRET

PATHS = ["/me/core-memories", "/tools", "/audit/events"]
_ABSENT = object()


def token(exp: Any) -> str:
    claims: dict[str, Any] = {"sub": "alice", "roles": ["auditor"]}
    if exp is not _ABSENT:
        claims["exp"] = exp
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


def raw_token(payload: str) -> str:
    """A token whose payload JSON is written by hand (NaN and Infinity are not JSON)."""
    header = jwt.utils.base64url_encode(b'{"alg":"HS256","typ":"JWT"}')
    body = jwt.utils.base64url_encode(payload.encode())
    signing_input = header + b"." + body
    signature = jwt.algorithms.HMACAlgorithm(jwt.algorithms.HMACAlgorithm.SHA256).sign(
        signing_input, JWT_SECRET.encode()
    )
    return (signing_input + b"." + jwt.utils.base64url_encode(signature)).decode()


def soon() -> int:
    return int(time.time()) + 600


REFUSED = {
    "absent": lambda: token(_ABSENT),
    "null": lambda: token(None),
    "a string of digits": lambda: token(str(soon())),
    "a string": lambda: token("tomorrow"),
    "true": lambda: token(True),
    "a list": lambda: token([soon()]),
    "10^20": lambda: token(10**20),
    "1e20": lambda: token(1e20),
    "past the maximum": lambda: token(int(time.time() + MAX_TOKEN_LIFETIME) + 120),
    "NaN": lambda: raw_token('{"sub":"alice","exp":NaN}'),
    "Infinity": lambda: raw_token('{"sub":"alice","exp":Infinity}'),
    "1e309": lambda: raw_token('{"sub":"alice","exp":1e309}'),
}


@pytest.mark.parametrize("exp", REFUSED)
def test_a_token_without_a_valid_exp_is_401(client: TestClient, exp: str) -> None:
    headers = {"Authorization": f"Bearer {REFUSED[exp]()}"}
    for path in PATHS:
        response = client.get(path, headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert isinstance(response.json()["detail"], str)
    mcp = client.post(
        "/mcp",
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        headers={**headers, "Content-Type": "application/json", "Accept": "application/json"},
    )
    assert mcp.status_code == 401


@pytest.mark.parametrize("exp", [lambda: soon(), lambda: time.time() + MAX_TOKEN_LIFETIME - 60])
def test_a_numeric_exp_within_the_maximum_is_accepted(client: TestClient, exp: Any) -> None:
    headers = {"Authorization": f"Bearer {token(exp())}"}
    for path in PATHS:
        assert client.get(path, headers=headers).status_code == 200, path


def test_the_maximum_lifetime_is_the_services_setting(services: Services) -> None:
    short = dataclasses.replace(services, max_token_lifetime=300)
    with TestClient(create_app(short)) as client:
        within = {"Authorization": f"Bearer {token(int(time.time()) + 240)}"}
        beyond = {"Authorization": f"Bearer {token(int(time.time()) + 420)}"}
        assert client.get("/me/core-memories", headers=within).status_code == 200
        assert client.get("/me/core-memories", headers=beyond).status_code == 401


def test_minted_tokens_are_within_the_default_maximum() -> None:
    identity = verify_token(mint_token(JWT_SECRET, "alice"), JWT_SECRET)
    assert identity.claims["exp"] <= time.time() + MAX_TOKEN_LIFETIME
    with pytest.raises(InvalidToken, match="maximum token lifetime"):
        verify_token(mint_token(JWT_SECRET, "alice"), JWT_SECRET, max_lifetime=3600)
