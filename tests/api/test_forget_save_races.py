"""A forget racing a save under the same key never answers outside the save's contract
(issue 22, 7a): `save_core_memory` answers 200 created|unchanged|candidate_created, `PUT
/me/memories` 200 (created or replaced), `POST /me/core-memories` 201/200, never 409
`key_exists` naming a memory forgotten meanwhile, nor 410.

Each window is made exact by forgetting from another ledger (another process) at the moment
the save has read the key's holder; a threaded test then races them freely.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope

Auth = Callable[..., dict[str, str]]
KEY = "drink"
OLD = {"memory_key": KEY, "content": "I like green tea", "category": "preference"}
NEW = {**OLD, "content": "I like black coffee"}
SAVES = {
    "save_core_memory": ("POST", "/tools/save_core_memory", {**NEW, "scope_type": "global"}),
    "legacy put": ("PUT", "/me/memories", NEW),
    "create": ("POST", "/me/core-memories", {**NEW, "scope_type": "global"}),
}


def headers(auth: Auth, name: str) -> dict[str, str]:
    return auth(workspace="learning") if name == "save_core_memory" else auth()


def remember(ledger: MemoryLedger) -> Any:
    outcome = ledger.create_memory("alice", scope=Scope.global_(), **OLD)
    assert outcome.memory is not None
    return outcome.memory.memory_id


@pytest.fixture
def forget_once_the_holder_is_read(
    services: Services, make_ledger: Callable[..., MemoryLedger]
) -> Iterator[list[Any]]:
    """Forget the key's holder (from another ledger) right after the save looked it up."""
    lookups = services.ledger.store.lookups
    real = lookups.claim_holder
    other = make_ledger()
    forgotten: list[Any] = []

    def holder_then_forget(partition: int, claim: Any) -> Any:
        found = real(partition, claim)
        if found is not None and not forgotten:
            forgotten.append(found)
            other.forget_memory("alice", found)
        return found

    lookups.claim_holder = holder_then_forget  # type: ignore[method-assign]
    yield forgotten
    lookups.claim_holder = real  # type: ignore[method-assign]


@pytest.mark.parametrize("name", SAVES)
def test_a_save_whose_keys_holder_is_forgotten_meanwhile_creates(
    client: TestClient,
    auth: Auth,
    services: Services,
    forget_once_the_holder_is_read: list[Any],
    name: str,
) -> None:
    old = remember(services.ledger)
    method, path, body = SAVES[name]

    answer = client.request(method, path, json=body, headers=headers(auth, name))

    assert forget_once_the_holder_is_read == [old]  # the window was hit
    assert answer.status_code in (200, 201), answer.text
    if name == "save_core_memory":
        assert answer.json()["status"] == "created"
    listed = client.get("/me/core-memories", headers=auth()).json()["items"]
    assert [(m["memory_key"], m["content"]) for m in listed] == [(KEY, NEW["content"])]


@pytest.mark.parametrize("name", SAVES)
def test_saves_racing_forgets_answer_within_their_contract(
    client: TestClient, auth: Auth, services: Services, name: str
) -> None:
    """Two savers and a forgetter on one key, in threads, for a number of rounds."""
    method, path, body = SAVES[name]
    answers: list[Any] = []

    def save(started: threading.Barrier, i: int) -> None:
        started.wait()
        for n in range(3):
            content = {**body, "content": f"coffee {i} {n}"}
            answers.append(client.request(method, path, json=content, headers=headers(auth, name)))

    def forget(started: threading.Barrier) -> None:
        started.wait()
        for _ in range(3):
            client.delete(f"/me/memories/{KEY}", headers=auth())

    for _ in range(4):
        if not client.get("/me/memories", headers=auth()).json():
            remember(services.ledger)
        started = threading.Barrier(3)
        threads = [threading.Thread(target=save, args=(started, i)) for i in range(2)]
        threads.append(threading.Thread(target=forget, args=(started,)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    allowed = {201, 200} if name == "create" else {200}
    assert {a.status_code for a in answers} <= allowed | ({409} if name == "create" else set()), {
        a.text for a in answers if a.status_code not in allowed
    }
    for answer in answers:
        if answer.status_code == 409:  # POST: only a live memory with other content
            assert answer.json()["reason"] == "key_exists"
            held = client.get(f"/me/core-memories/{answer.json()['memory_id']}", headers=auth())
            assert held.status_code in (200, 410)
        if name == "save_core_memory":
            assert answer.json()["status"] in ("created", "unchanged", "candidate_created")
