"""The candidate API over HTTP, status by status (API_CONTRACT.md, 'Management API')."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import token
from domain.model.values import Scope

Auth = Callable[..., dict[str, str]]
BASE = "/me/memory-candidates"
MEMORIES = "/me/core-memories"
CANDIDATE_FIELDS = {
    "candidate_id",
    "operation",
    "target_memory_id",
    "expected_revision",
    "proposed_scope_type",
    "proposed_workspace_type",
    "proposed_key",
    "proposed_content",
    "proposed_category",
    "source_conversation_id",
    "status",
    "resulting_memory_id",
    "created_at",
    "decided_at",
    "expires_at",
}


def propose(ledger: MemoryLedger, user_id: str = "alice", **fields: Any) -> str:
    """A pending candidate made the way the agent tools make them; returns its id."""
    options: dict[str, Any] = {
        "operation": "create",
        "scope": Scope.workspace("learning"),
        "memory_key": "explanation_preference",
        "content": "I prefer examples first",
        "category": "preference",
        "source_conversation_id": "conv-1",
    } | fields
    outcome = ledger.propose_candidate(user_id, **options)
    assert outcome.status == "candidate_created" and outcome.candidate is not None
    return str(outcome.candidate.candidate_id)


def create_memory(client: TestClient, auth: Auth, **fields: Any) -> dict[str, Any]:
    body = {
        "memory_key": "style",
        "content": "Examples first",
        "category": "preference",
        "scope_type": "global",
    } | fields
    response = client.post(MEMORIES, json=body, headers=auth())
    assert response.status_code == 201
    return dict(response.json())


def decisions(services: Services, decision: str) -> float | None:
    """The memledger_candidates counter for one decision."""
    registry = services.metrics.registry
    return registry.get_sample_value("memledger_candidates_total", {"decision": decision})


def listed(
    client: TestClient, auth: Auth, status: str | None = None, *, after: int = 0
) -> list[Any]:
    """The caller's candidates in one status (after: wait for that ledger position)."""
    params = {"status": status} if status else {}
    headers = auth() | ({"X-Min-Position": token(after)} if after else {})
    response = client.get(BASE, params=params, headers=headers)
    assert response.status_code == 200
    return list(response.json()["items"])


def test_pending_candidates_are_listed_in_the_contract_shape(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    first = propose(ledger)
    second = propose(ledger, memory_key="goal", content="Pass the exam", category="goal")
    propose(ledger, "mallory", memory_key="other")
    items = listed(client, auth, after=ledger.position("alice"))
    assert [c["candidate_id"] for c in items] == [second, first]  # newest first
    assert set(items[1]) == CANDIDATE_FIELDS
    assert items[1] | {"created_at": None, "expires_at": None} == {
        "candidate_id": first,
        "operation": "create",
        "target_memory_id": None,
        "expected_revision": None,
        "proposed_scope_type": "workspace",
        "proposed_workspace_type": "learning",
        "proposed_key": "explanation_preference",
        "proposed_content": "I prefer examples first",
        "proposed_category": "preference",
        "source_conversation_id": "conv-1",
        "status": "pending",
        "resulting_memory_id": None,
        "created_at": None,
        "decided_at": None,
        "expires_at": None,
    }
    assert items == listed(client, auth, "pending")
    assert listed(client, auth, "accepted") == [] and listed(client, auth, "rejected") == []


def test_an_unknown_status_is_422(client: TestClient, auth: Auth) -> None:
    response = client.get(BASE, params={"status": "deleted"}, headers=auth())
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], str) and "status" in response.json()["detail"]


def test_accept_as_proposed_creates_a_confirmed_memory(
    client: TestClient, auth: Auth, ledger: MemoryLedger, services: Services
) -> None:
    candidate_id = propose(ledger)
    response = client.post(f"{BASE}/{candidate_id}/accept", headers=auth())
    assert response.status_code == 200
    body = response.json()
    candidate, memory = body["candidate"], body["memory"]
    assert set(candidate) == CANDIDATE_FIELDS
    assert candidate["status"] == "accepted" and candidate["decided_at"] is not None
    assert candidate["resulting_memory_id"] == memory["memory_id"]
    assert (memory["memory_key"], memory["content"], memory["category"]) == (
        "explanation_preference",
        "I prefer examples first",
        "preference",
    )
    assert (memory["scope_type"], memory["workspace_type"]) == ("workspace", "learning")
    assert (memory["source_type"], memory["revision"]) == ("confirmed", 1)
    # Read-your-writes: the lists and the memory reflect the decision right away.
    assert listed(client, auth) == []
    assert [c["candidate_id"] for c in listed(client, auth, "accepted")] == [candidate_id]
    fetched = client.get(f"{MEMORIES}/{memory['memory_id']}", headers=auth())
    assert fetched.status_code == 200 and fetched.json() == memory
    versions = client.get(f"{MEMORIES}/{memory['memory_id']}/versions", headers=auth()).json()
    assert [
        (v["change_type"], v["changed_via"], v["source_candidate_id"]) for v in versions["items"]
    ] == [("create", "candidate", candidate_id)]
    assert decisions(services, "accepted") == 1


def test_accept_with_edits_to_content_category_and_scope(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger)
    edits = {
        "content": "Worked examples, then the definition",
        "category": "constraint",
        "scope_type": "global",
    }
    response = client.post(f"{BASE}/{candidate_id}/accept", json=edits, headers=auth())
    assert response.status_code == 200
    memory = response.json()["memory"]
    assert (memory["content"], memory["category"]) == (edits["content"], "constraint")
    assert (memory["scope_type"], memory["workspace_type"]) == ("global", None)
    # The candidate still shows what was proposed; the memory holds what was accepted.
    assert response.json()["candidate"]["proposed_content"] == "I prefer examples first"


def test_accept_into_another_workspace(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger, scope=Scope.global_())
    response = client.post(
        f"{BASE}/{candidate_id}/accept",
        json={"scope_type": "workspace", "workspace_type": "research"},
        headers=auth(),
    )
    assert response.status_code == 200
    memory = response.json()["memory"]
    assert (memory["scope_type"], memory["workspace_type"]) == ("workspace", "research")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user_id": "mallory"}, "user_id"),
        ({"memory_key": "other"}, "memory_key"),
        ({"content": ""}, "content"),
        ({"category": "secret"}, "category"),
        ({"scope_type": "project"}, "scope_type"),
        ({"workspace_type": "kitchen"}, "workspace_type"),
        ({"scope_type": "workspace"}, "workspace_type"),  # no workspace named
        ({"scope_type": "global", "workspace_type": "learning"}, "workspace_type"),
    ],
)
def test_invalid_accept_bodies_are_422_and_leave_the_candidate_pending(
    client: TestClient, auth: Auth, ledger: MemoryLedger, body: dict[str, Any], field: str
) -> None:
    candidate_id = propose(ledger)
    response = client.post(f"{BASE}/{candidate_id}/accept", json=body, headers=auth())
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], str) and field in response.json()["detail"]
    assert any(field in e["field"] for e in response.json()["errors"])
    assert [c["candidate_id"] for c in listed(client, auth, after=ledger.position("alice"))] == [
        candidate_id
    ]


def test_secrets_in_edited_content_are_422_sensitive_content(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger)
    secret = "my api key is sk-proj-4fJ9kLmN2pQ8rS7tU6vW5xY3zA1bC0dE9fG8hI7j"
    response = client.post(
        f"{BASE}/{candidate_id}/accept", json={"content": secret}, headers=auth()
    )
    assert response.status_code == 422 and response.json()["reason"] == "sensitive_content"


def test_scope_edits_on_a_change_candidate_are_422(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    memory = create_memory(client, auth)
    candidate_id = propose(
        ledger,
        operation="update",
        scope=Scope.global_(),
        memory_key="style",
        content="Examples, then rules",
        target_memory_id=UUID(memory["memory_id"]),
    )
    response = client.post(
        f"{BASE}/{candidate_id}/accept", json={"scope_type": "global"}, headers=auth()
    )
    assert response.status_code == 422 and "scope_type" in response.json()["detail"]


@pytest.mark.parametrize("operation", ["update", "replace"])
def test_an_accepted_change_makes_a_candidate_version(
    client: TestClient, auth: Auth, ledger: MemoryLedger, operation: str
) -> None:
    memory = create_memory(client, auth)
    candidate_id = propose(
        ledger,
        operation=operation,
        scope=Scope.global_(),
        memory_key="style",
        content="Rules first, then examples",
        target_memory_id=UUID(memory["memory_id"]),
    )
    pending = listed(client, auth, after=ledger.position("alice"))
    assert (pending[0]["target_memory_id"], pending[0]["expected_revision"]) == (
        memory["memory_id"],
        1,
    )
    response = client.post(f"{BASE}/{candidate_id}/accept", headers=auth())
    assert response.status_code == 200
    updated = response.json()["memory"]
    assert (updated["memory_id"], updated["revision"]) == (memory["memory_id"], 2)
    assert updated["content"] == "Rules first, then examples"
    assert response.json()["candidate"]["resulting_memory_id"] == memory["memory_id"]
    versions = client.get(f"{MEMORIES}/{memory['memory_id']}/versions", headers=auth()).json()
    assert [
        (v["revision"], v["change_type"], v["changed_via"], v["source_candidate_id"])
        for v in versions["items"]
    ] == [(1, "create", "user_api", None), (2, operation, "candidate", candidate_id)]


def test_accepting_after_the_target_changed_is_409_revision_conflict(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    memory = create_memory(client, auth)
    candidate_id = propose(
        ledger,
        operation="replace",
        scope=Scope.global_(),
        memory_key="style",
        content="Rules first",
        target_memory_id=UUID(memory["memory_id"]),
    )
    patched = client.patch(
        f"{MEMORIES}/{memory['memory_id']}",
        json={"expected_revision": 1, "content": "Examples, always"},
        headers=auth(),
    )
    assert patched.status_code == 200
    response = client.post(f"{BASE}/{candidate_id}/accept", headers=auth())
    assert response.status_code == 409
    assert response.json() | {"detail": ""} == {
        "detail": "",
        "reason": "revision_conflict",
        "current_revision": 2,
    }
    kept = client.get(f"{MEMORIES}/{memory['memory_id']}", headers=auth()).json()
    assert (kept["content"], kept["revision"]) == ("Examples, always", 2)
    assert [c["candidate_id"] for c in listed(client, auth)] == [candidate_id]  # still pending


def test_accepting_a_key_already_holding_other_content_is_409_key_exists(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger, scope=Scope.global_(), memory_key="style")
    memory = create_memory(client, auth, content="Definitions first")
    response = client.post(f"{BASE}/{candidate_id}/accept", headers=auth())
    assert response.status_code == 409
    assert response.json()["reason"] == "key_exists"
    assert response.json()["memory_id"] == memory["memory_id"]


def test_accepting_a_key_already_holding_the_same_content_links_to_it(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger, scope=Scope.global_(), memory_key="style")
    memory = create_memory(client, auth, content="i prefer EXAMPLES first.")
    response = client.post(f"{BASE}/{candidate_id}/accept", headers=auth())
    assert response.status_code == 200
    assert response.json()["memory"]["memory_id"] == memory["memory_id"]
    assert response.json()["memory"]["revision"] == 1
    assert response.json()["candidate"]["resulting_memory_id"] == memory["memory_id"]


def test_reject_shreds_the_proposal(
    client: TestClient, auth: Auth, ledger: MemoryLedger, services: Services
) -> None:
    candidate_id = propose(ledger)
    response = client.post(f"{BASE}/{candidate_id}/reject", headers=auth())
    assert response.status_code == 200
    candidate = response.json()
    assert set(candidate) == CANDIDATE_FIELDS
    assert (candidate["candidate_id"], candidate["status"]) == (candidate_id, "rejected")
    assert candidate["decided_at"] is not None and candidate["resulting_memory_id"] is None
    assert (candidate["proposed_key"], candidate["proposed_content"]) == ("[redacted]",) * 2
    assert listed(client, auth) == []
    rejected = listed(client, auth, "rejected")
    assert [c["candidate_id"] for c in rejected] == [candidate_id]
    assert (rejected[0]["proposed_key"], rejected[0]["proposed_content"]) == ("[redacted]",) * 2
    assert client.get(MEMORIES, headers=auth()).json()["items"] == []
    assert decisions(services, "rejected") == 1


@pytest.mark.parametrize(
    ("first", "then"),
    [("accept", "accept"), ("accept", "reject"), ("reject", "accept"), ("reject", "reject")],
)
def test_a_decided_candidate_is_409_candidate_decided(
    client: TestClient, auth: Auth, ledger: MemoryLedger, first: str, then: str
) -> None:
    candidate_id = propose(ledger)
    assert client.post(f"{BASE}/{candidate_id}/{first}", headers=auth()).status_code == 200
    response = client.post(f"{BASE}/{candidate_id}/{then}", headers=auth())
    assert response.status_code == 409
    assert response.json()["reason"] == "candidate_decided"
    assert response.json()["status"] == {"accept": "accepted", "reject": "rejected"}[first]
    assert isinstance(response.json()["detail"], str)


def test_an_expired_candidate_cannot_be_decided(
    client: TestClient, auth: Auth, ledger: MemoryLedger, clock: Any
) -> None:
    candidate_id = propose(ledger)
    clock.advance(days=31)
    assert listed(client, auth) == []  # past its expiry: no longer offered
    for decision in ("accept", "reject"):
        response = client.post(f"{BASE}/{candidate_id}/{decision}", headers=auth())
        assert response.status_code == 409
        assert response.json()["reason"] == "candidate_decided"
        assert response.json()["status"] == "expired"
    expired = listed(client, auth, "expired", after=ledger.position("alice"))
    assert [c["candidate_id"] for c in expired] == [candidate_id]
    assert (expired[0]["proposed_key"], expired[0]["proposed_content"]) == ("[redacted]",) * 2


def test_another_users_candidate_is_404(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    candidate_id = propose(ledger)
    for decision in ("accept", "reject"):
        response = client.post(f"{BASE}/{candidate_id}/{decision}", headers=auth("mallory"))
        assert response.status_code == 404, decision
        assert response.json() == {"detail": "not found"}
    assert client.get(BASE, headers=auth("mallory")).json() == {"items": []}
    assert [c["candidate_id"] for c in listed(client, auth, after=ledger.position("alice"))] == [
        candidate_id
    ]


@pytest.mark.parametrize("decision", ["accept", "reject"])
def test_unknown_or_malformed_candidate_ids(client: TestClient, auth: Auth, decision: str) -> None:
    assert client.post(f"{BASE}/{uuid4()}/{decision}", headers=auth()).status_code == 404
    assert client.post(f"{BASE}/not-a-uuid/{decision}", headers=auth()).status_code == 422


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", BASE),
        ("POST", f"{BASE}/{uuid4()}/accept"),
        ("POST", f"{BASE}/{uuid4()}/reject"),
    ],
    ids=["list", "accept", "reject"],  # the same on every pytest-xdist worker
)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-jwt"}])
def test_no_valid_token_is_401(
    client: TestClient, method: str, path: str, headers: dict[str, str]
) -> None:
    response = client.request(method, path, json={"bogus": 1}, headers=headers)
    assert response.status_code == 401  # identity is checked before validation


def test_the_accept_body_is_documented_with_examples(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["CandidateAccept"]["examples"]
    assert schemas["CandidateAccept"]["additionalProperties"] is False
    assert "[redacted]" in schemas["Candidate"]["properties"]["proposed_content"]["description"]


def test_a_candidate_about_a_forgotten_memory_ends_expired_and_shredded(
    client: TestClient, auth: Auth, ledger: MemoryLedger
) -> None:
    memory = create_memory(client, auth)
    candidate_id = propose(
        ledger,
        operation="replace",
        scope=Scope.global_(),
        memory_key="style",
        content="Rules first",
        target_memory_id=UUID(memory["memory_id"]),
    )
    assert client.delete(f"{MEMORIES}/{memory['memory_id']}", headers=auth()).status_code == 204
    assert listed(client, auth, after=ledger.position("alice")) == []
    expired = listed(client, auth, "expired")
    assert [(c["candidate_id"], c["proposed_key"], c["proposed_content"]) for c in expired] == [
        (candidate_id, "[redacted]", "[redacted]")
    ]
    for decision in ("accept", "reject"):
        decided = client.post(f"{BASE}/{candidate_id}/{decision}", headers=auth())
        assert decided.status_code == 409 and decided.json()["status"] == "expired"
