"""A data key wrapped under a master key the server does not hold (a key rotation it did not
follow) is a 503 with its reason, not a 500 (issue 13, item 6)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from domain.ledger.keyring import generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"


def remember(ledger: MemoryLedger, n: int) -> None:
    for i in range(n):
        ledger.create_memory(
            "alice", scope=Scope.global_(), memory_key=f"k{i}", content=f"fact {i}", category="fact"
        )


def test_a_data_key_under_a_master_key_the_server_lacks_is_503(
    client: TestClient,
    auth: Auth,
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
) -> None:
    # Another process wrote and rotated before this server ever needed the ledger's own key.
    writer = make_ledger(keys=[master_key])
    remember(writer, 1)
    writer.close()
    make_ledger(keys=[generate_master_key(), master_key]).keys.rotate()

    body = {"memory_key": "k", "content": "tea", "category": "fact", "scope_type": "global"}
    response = client.post(BASE, json=body, headers=auth("bob"))

    assert response.status_code == 503, response.text
    assert response.json()["reason"] == "master_key_missing"
    assert response.headers["Retry-After"]
