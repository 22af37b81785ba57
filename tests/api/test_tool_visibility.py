"""Tools never return, compare against or confirm a memory the agent may not see (issue 13, 4).

Invisible to an agent in workspace W: a suppressed memory, an expired one, one in another
workspace. Saving or proposing content under such a memory's key answers exactly as it would
for any other content (a replace candidate for the user), so a guess is never confirmed, and
no answer carries the hidden memory.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Clock

Auth = Callable[..., dict[str, str]]
SECRET_CONTENT = "I am seeing a therapist on Tuesdays"
OTHER_CONTENT = "I like green tea"
MEMORY = {
    "memory_key": "private_note",
    "content": SECRET_CONTENT,
    "category": "background",
    "scope_type": "global",
}


def create(client: TestClient, auth: Auth, **fields: Any) -> dict[str, Any]:
    response = client.post("/me/core-memories", json={**MEMORY, **fields}, headers=auth("alice"))
    assert response.status_code == 201, response.text
    return response.json()


def hide(client: TestClient, auth: Auth, clock: Clock, how: str) -> dict[str, Any]:
    """A memory the learning agent may not see: suppressed or expired."""
    if how == "suppressed":
        memory = create(client, auth)
        response = client.post(
            f"/me/core-memories/{memory['memory_id']}/suppress", headers=auth("alice")
        )
        assert response.status_code == 200
        return memory
    memory = create(client, auth, expires_at=(clock.now + timedelta(hours=1)).isoformat())
    clock.advance(hours=2)
    return memory


def tool(client: TestClient, auth: Auth, name: str, **body: Any) -> Any:
    return client.post(f"/tools/{name}", json=body, headers=auth("alice", workspace="learning"))


def shape(answer: dict[str, Any]) -> tuple[Any, ...]:
    """What an agent can tell apart: status, which parts are there, the candidate's kind."""
    candidate = answer.get("candidate") or {}
    return (
        answer["status"],
        answer.get("memory") is not None,
        candidate.get("operation"),
        candidate.get("target_memory_id"),
    )


HIDDEN = ["suppressed", "expired"]


@pytest.mark.parametrize("how", HIDDEN)
@pytest.mark.parametrize("name", ["save_core_memory", "propose_core_memory"])
def test_the_exact_hidden_content_is_not_confirmed(
    client: TestClient, auth: Auth, clock: Clock, how: str, name: str
) -> None:
    hide(client, auth, clock, how)

    guessed = tool(client, auth, name, **MEMORY)
    other = tool(client, auth, name, **{**MEMORY, "content": OTHER_CONTENT})

    assert guessed.status_code == other.status_code == 200, (guessed.text, other.text)
    assert shape(guessed.json()) == shape(other.json())
    assert guessed.json()["status"] == "candidate_created"
    assert guessed.json().get("memory") is None


@pytest.mark.parametrize("how", HIDDEN)
def test_a_save_after_a_rejected_replacement_does_not_show_the_hidden_memory(
    client: TestClient, auth: Auth, clock: Clock, how: str
) -> None:
    """The issue's reproduction: `unchanged` used to carry the suppressed memory's content."""
    hide(client, auth, clock, how)
    first = tool(client, auth, "save_core_memory", **{**MEMORY, "content": OTHER_CONTENT})
    assert first.json()["status"] == "candidate_created"
    candidate_id = first.json()["candidate"]["candidate_id"]
    rejected = client.post(f"/me/memory-candidates/{candidate_id}/reject", headers=auth("alice"))
    assert rejected.status_code == 200

    again = tool(client, auth, "save_core_memory", **{**MEMORY, "content": OTHER_CONTENT})

    assert again.status_code == 200
    assert again.json()["status"] == "unchanged"
    assert again.json().get("memory") is None
    assert SECRET_CONTENT not in again.text


def test_a_visible_memory_still_answers_unchanged_with_itself(
    client: TestClient, auth: Auth
) -> None:
    memory = create(client, auth)

    same = tool(client, auth, "save_core_memory", **MEMORY)

    assert same.json()["status"] == "unchanged"
    assert same.json()["memory"]["memory_id"] == memory["memory_id"]
    duplicate = tool(client, auth, "propose_core_memory", **MEMORY)
    assert duplicate.json()["status"] == "duplicate"


@pytest.mark.parametrize("name", ["save_core_memory", "propose_core_memory"])
def test_another_workspaces_memory_never_meets_a_tool(
    client: TestClient, auth: Auth, name: str
) -> None:
    teaching = create(client, auth, scope_type="workspace", workspace_type="teaching")

    answer = tool(client, auth, name, **{**MEMORY, "scope_type": "workspace"})

    assert answer.status_code == 200
    if name == "save_core_memory":  # a new memory of the learning workspace, nothing compared
        assert answer.json()["status"] == "created"
        assert answer.json()["memory"]["memory_id"] != teaching["memory_id"]
        assert answer.json()["memory"]["workspace_type"] == "learning"
    else:
        assert answer.json()["status"] == "candidate_created"
        assert answer.json()["candidate"]["operation"] == "create"
        assert answer.json()["candidate"]["target_memory_id"] is None


@pytest.mark.parametrize("how", [*HIDDEN, "other_workspace"])
def test_hidden_memories_are_not_found_listed_changed_or_forgotten(
    client: TestClient, auth: Auth, clock: Clock, how: str
) -> None:
    if how == "other_workspace":
        memory = create(client, auth, scope_type="workspace", workspace_type="teaching")
    else:
        memory = hide(client, auth, clock, how)
    memory_id = memory["memory_id"]

    found = tool(client, auth, "search_core_memories", query="therapist Tuesdays")
    listed = tool(client, auth, "list_core_memories")
    updated = tool(client, auth, "update_core_memory", memory_id=memory_id, content="changed")
    forgotten = tool(client, auth, "forget_core_memory", memory_id=memory_id)

    assert found.status_code == listed.status_code == 200
    assert found.json()["items"] == [] and listed.json()["items"] == []
    assert updated.status_code == forgotten.status_code == 404
    for answer in (found, listed, updated, forgotten):
        assert SECRET_CONTENT not in answer.text
    kept = client.get(f"/me/core-memories/{memory_id}", headers=auth("alice"))
    assert kept.status_code == 200 and kept.json()["content"] == SECRET_CONTENT
    assert kept.json()["revision"] == 1


# -- hidden means indistinguishable (issue 22, 4) ------------------------------------------------

FREE = {**MEMORY, "memory_key": "free_note", "content": OTHER_CONTENT}
PER_CALL = {"candidate_id", "created_at", "expires_at", "proposed_key", "proposed_content"}


def assert_like(hidden: dict[str, Any], free: dict[str, Any]) -> None:
    """Field by field, the same answer but for what differs between any two calls (a save's
    answer has a `memory` field too: null here, as beside any candidate)."""
    assert hidden["status"] == free["status"] == "candidate_created"
    assert hidden.get("memory") is None
    assert hidden["candidate"].keys() == free["candidate"].keys()
    for name, value in hidden["candidate"].items():
        if name not in PER_CALL:
            assert value == free["candidate"][name], name


def assert_reveals_nothing(answer: Any, memory: dict[str, Any]) -> None:
    assert memory["memory_id"] not in answer.text
    assert SECRET_CONTENT not in answer.text
    candidate = answer.json().get("candidate") or {}
    assert candidate.get("operation") in (None, "create")
    assert candidate.get("target_memory_id") is None
    assert candidate.get("expected_revision") is None


@pytest.mark.parametrize("how", HIDDEN)
@pytest.mark.parametrize("name", ["save_core_memory", "propose_core_memory"])
def test_an_answer_about_a_hidden_key_reads_like_a_new_memory_proposal(
    client: TestClient, auth: Auth, clock: Clock, how: str, name: str
) -> None:
    memory = hide(client, auth, clock, how)

    hidden = tool(client, auth, name, **{**MEMORY, "content": OTHER_CONTENT})
    free = tool(client, auth, "propose_core_memory", **FREE)

    assert hidden.status_code == free.status_code == 200, (hidden.text, free.text)
    assert_like(hidden.json(), free.json())
    assert_reveals_nothing(hidden, memory)
    again = tool(client, auth, name, **{**MEMORY, "content": OTHER_CONTENT})
    assert again.json()["candidate"]["candidate_id"] == hidden.json()["candidate"]["candidate_id"]
    assert_reveals_nothing(again, memory)


@pytest.mark.parametrize("how", HIDDEN)
def test_the_user_still_sees_a_replacement_of_the_hidden_memory(
    client: TestClient, auth: Auth, clock: Clock, how: str
) -> None:
    """The save neither overwrites nor duplicates the hidden memory: the user decides."""
    memory = hide(client, auth, clock, how)

    tool(client, auth, "save_core_memory", **{**MEMORY, "content": OTHER_CONTENT})

    pending = client.get("/me/memory-candidates", headers=auth("alice")).json()["items"]
    assert [(c["operation"], c["target_memory_id"]) for c in pending] == [
        ("replace", memory["memory_id"])
    ]
    listed = client.get("/me/core-memories", headers=auth("alice")).json()["items"]
    assert [(m["memory_id"], m["content"], m["revision"]) for m in listed] == [
        (memory["memory_id"], SECRET_CONTENT, 1)
    ]


@pytest.mark.parametrize("how", [*HIDDEN, "other_workspace"])
@pytest.mark.parametrize("name", ["update_core_memory", "forget_core_memory"])
def test_a_hidden_memory_is_not_found_exactly_like_another_users(
    client: TestClient, auth: Auth, clock: Clock, how: str, name: str
) -> None:
    if how == "other_workspace":
        memory = create(client, auth, scope_type="workspace", workspace_type="teaching")
    else:
        memory = hide(client, auth, clock, how)
    bobs = client.post("/me/core-memories", json=MEMORY, headers=auth("bob")).json()
    body = {"content": "changed"} if name == "update_core_memory" else {}

    hidden = tool(client, auth, name, memory_id=memory["memory_id"], **body)
    foreign = tool(client, auth, name, memory_id=bobs["memory_id"], **body)

    assert hidden.status_code == foreign.status_code == 404
    assert hidden.json() == foreign.json() == {"detail": "not found"}
    assert hidden.headers.keys() == foreign.headers.keys()
