"""Memory keys at every door (issue 22, 7e): normalised (NFKC, case-folded, separators to `_`)
on write and on lookup alike, and a word mixing Latin with Cyrillic or Greek look-alikes is
refused (422), so `tea` spelt with Cyrillic letters (U+0435, U+0430) can never be a key of its
own beside `tea`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

Auth = Callable[..., dict[str, str]]
LOOKALIKE = "t\u0435\u0430"  # t, then Cyrillic U+0435 and U+0430: looks like tea
BODY = {"content": "I like green tea", "category": "preference"}
DOORS: dict[str, tuple[str, str, dict[str, Any], bool]] = {
    "create": ("POST", "/me/core-memories", {**BODY, "scope_type": "global"}, False),
    "legacy put": ("PUT", "/me/memories", BODY, False),
    "save tool": ("POST", "/tools/save_core_memory", {**BODY, "scope_type": "global"}, True),
    "propose tool": ("POST", "/tools/propose_core_memory", {**BODY, "scope_type": "global"}, True),
}


def call(client: TestClient, auth: Auth, door: str, key: str) -> Any:
    method, path, body, agent = DOORS[door]
    headers = auth(workspace="learning") if agent else auth()
    return client.request(method, path, json={**body, "memory_key": key}, headers=headers)


@pytest.mark.parametrize("door", DOORS)
def test_a_lookalike_key_is_refused_at_every_door(
    client: TestClient, auth: Auth, door: str
) -> None:
    answer = call(client, auth, door, LOOKALIKE)

    assert answer.status_code == 422, answer.text
    assert "mixes Latin with Cyrillic or Greek" in answer.json()["detail"]
    assert [e["field"] for e in answer.json()["errors"]] == ["memory_key"]


def test_deleting_a_lookalike_key_is_refused_and_leaves_the_real_one(
    client: TestClient, auth: Auth
) -> None:
    assert call(client, auth, "legacy put", "tea").status_code == 200

    deleted = client.delete(f"/me/memories/{LOOKALIKE}", headers=auth())

    assert deleted.status_code == 422
    assert [m["memory_key"] for m in client.get("/me/memories", headers=auth()).json()] == ["tea"]


@pytest.mark.parametrize("spelling", ["TEA", "\uff34\uff25\uff21", " Tea "])
def test_a_key_is_found_however_it_is_spelled(
    client: TestClient, auth: Auth, spelling: str
) -> None:
    """Normalised on lookup as on write: case, full width and spaces address the same key."""
    assert call(client, auth, "legacy put", "tea").status_code == 200
    again = call(client, auth, "create", spelling)
    assert again.status_code == 200 and again.json()["memory_key"] == "tea"  # unchanged

    assert client.delete(f"/me/memories/{spelling.strip()}", headers=auth()).status_code == 204
    assert client.get("/me/memories", headers=auth()).json() == []


def test_keys_in_one_script_per_word_are_kept(client: TestClient, auth: Auth) -> None:
    for key in ["\u0447\u0430\u0439", "green_\u0447\u0430\u0439", "\u03ba\u03b1\u03c6\u03ad"]:
        answer = call(client, auth, "create", key)
        assert answer.status_code == 201, answer.text
        assert answer.json()["memory_key"] == key
        assert client.delete(f"/me/memories/{key}", headers=auth()).status_code == 204
