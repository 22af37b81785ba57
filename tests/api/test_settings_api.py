"""The memory settings API over HTTP (API_CONTRACT.md, 'Management API')."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from domain.ledger.ledger import MemoryLedger

Auth = Callable[..., dict[str, str]]
BASE = "/me/memory-settings"
DEFAULTS = {"saved_memory_enabled": True, "auto_extract_enabled": True}


def test_both_switches_default_to_true(client: TestClient, auth: Auth) -> None:
    response = client.get(BASE, headers=auth())
    assert response.status_code == 200 and response.json() == DEFAULTS


def test_patch_changes_one_switch_and_keeps_the_other(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    response = client.patch(BASE, json={"auto_extract_enabled": False}, headers=auth())
    assert response.status_code == 200
    assert response.json() == {"saved_memory_enabled": True, "auto_extract_enabled": False}
    response = client.patch(BASE, json={"saved_memory_enabled": False}, headers=auth())
    assert response.json() == {"saved_memory_enabled": False, "auto_extract_enabled": False}
    assert client.get(BASE, headers=auth()).json() == response.json()
    assert ledger.get_settings("alice").saved_memory_enabled is False
    both = client.patch(BASE, json=DEFAULTS, headers=auth())
    assert both.status_code == 200 and both.json() == DEFAULTS


def test_the_same_value_again_is_200(client: TestClient, auth: Auth) -> None:
    first = client.patch(BASE, json={"auto_extract_enabled": False}, headers=auth())
    again = client.patch(BASE, json={"auto_extract_enabled": False}, headers=auth())
    assert again.status_code == 200 and again.json() == first.json()


def test_settings_are_per_user(client: TestClient, auth: Auth) -> None:
    client.patch(BASE, json={"saved_memory_enabled": False}, headers=auth())
    assert client.get(BASE, headers=auth("bob")).json() == DEFAULTS


def test_the_management_api_keeps_working_with_memory_disabled(
    client: TestClient, auth: Auth
) -> None:
    client.patch(
        BASE,
        json={"saved_memory_enabled": False, "auto_extract_enabled": False},
        headers=auth(),
    )
    created = client.post(
        "/me/core-memories",
        json={
            "memory_key": "style",
            "content": "Examples first",
            "category": "preference",
            "scope_type": "global",
        },
        headers=auth(),
    )
    assert created.status_code == 201
    assert client.get("/me/memory-candidates", headers=auth()).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"user_id": "mallory", "auto_extract_enabled": False}, "user_id"),
        ({"memory_enabled": False}, "memory_enabled"),
        ({"saved_memory_enabled": "false"}, "saved_memory_enabled"),
        ({"saved_memory_enabled": 0}, "saved_memory_enabled"),
        ({"auto_extract_enabled": "yes"}, "auto_extract_enabled"),
        ({"auto_extract_enabled": None}, "auto_extract_enabled"),
    ],
)
def test_invalid_patches_are_422_and_change_nothing(
    client: TestClient, auth: Auth, body: dict[str, Any], field: str
) -> None:
    response = client.patch(BASE, json=body, headers=auth())
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], str) and field in response.json()["detail"]
    assert client.get(BASE, headers=auth()).json() == DEFAULTS


def test_a_non_object_body_is_422(client: TestClient, auth: Auth) -> None:
    for body in ([True], "true", None):
        assert client.patch(BASE, json=body, headers=auth()).status_code == 422


@pytest.mark.parametrize("method", ["GET", "PATCH"])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-jwt"}])
def test_no_valid_token_is_401(client: TestClient, method: str, headers: dict[str, str]) -> None:
    response = client.request(method, BASE, json={"bogus": 1}, headers=headers)
    assert response.status_code == 401


def test_the_patch_body_is_documented_with_examples(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["SettingsPatch"]
    assert schema["examples"] and schema["additionalProperties"] is False
