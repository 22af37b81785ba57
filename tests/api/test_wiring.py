"""Wiring happens once: a tool call builds no search engine, vector source or services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval.hybrid import HybridSource
from retrieval.search import MemorySearch

pytestmark = pytest.mark.integration


def test_a_search_uses_the_engine_built_with_the_services(
    client: TestClient, auth: Callable[..., dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_: Any, **__: Any) -> None:
        raise AssertionError("a search object was built during a request")

    monkeypatch.setattr(MemorySearch, "__init__", refused)
    monkeypatch.setattr(HybridSource, "__init__", refused)
    headers = auth("alice", workspace="learning")
    memory = {
        "memory_key": "drink",
        "content": "I like green tea",
        "category": "preference",
        "scope_type": "global",
    }
    saved = client.post("/tools/save_core_memory", headers=headers, json=memory)
    assert saved.status_code == 200, saved.text

    found = client.post("/tools/search_core_memories", headers=headers, json={"query": "tea"})

    assert found.status_code == 200, found.text
    assert [i["content"] for i in found.json()["items"]] == ["I like green tea"]
