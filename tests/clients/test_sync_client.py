"""`MemLedger` against a live server: the management API, candidates, settings, the legacy
endpoints, paging, and errors raised as exceptions carrying the contract's reason."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from memledger_client import (
    CandidateDecided,
    Forbidden,
    Forgotten,
    KeyExists,
    MemLedger,
    NotFound,
    RevisionConflict,
    SensitiveContent,
    Unauthorized,
    ValidationError,
)
from tests.clients.conftest import Requests, Token


def test_a_memory_is_created_corrected_versioned_suppressed_and_forgotten(alice: MemLedger) -> None:
    memory = alice.create_memory("language", "Answer in Python", "preference")
    assert (memory.revision, memory.status, memory.source_type) == (1, "active", "explicit")
    assert alice.create_memory("language", "Answer in Python", "preference") == memory

    corrected = alice.update_memory(memory.memory_id, 1, content="Answer in Rust")
    assert (corrected.revision, corrected.content) == (2, "Answer in Rust")
    versions = alice.list_versions(memory.memory_id)
    assert [(v.revision, v.content, v.change_type) for v in versions] == [
        (1, "Answer in Python", "create"),
        (2, "Answer in Rust", "update"),
    ]
    restored = alice.restore_version(memory.memory_id, 1, expected_revision=2)
    assert (restored.revision, restored.content) == (3, "Answer in Python")

    suppressed = alice.suppress_memory(memory.memory_id)
    assert (suppressed.status, suppressed.revision) == ("suppressed", 3)
    assert alice.restore_memory(memory.memory_id).status == "active"
    assert alice.get_memory(memory.memory_id).content == "Answer in Python"

    alice.forget_memory(memory.memory_id)
    with pytest.raises(Forgotten) as gone:
        alice.get_memory(memory.memory_id)
    assert (gone.value.status, gone.value.reason) == (410, "forgotten")
    with pytest.raises(Forgotten):
        alice.forget_memory(memory.memory_id)  # a second forget, not retried: still 410


def test_errors_are_exceptions_of_their_kind_with_the_contract_reason(
    alice: MemLedger, base_url: str, token: Token
) -> None:
    memory = alice.create_memory("language", "Answer in Python", "preference")
    with pytest.raises(NotFound) as missing:
        alice.get_memory(uuid.uuid4())
    assert missing.value.status == 404 and missing.value.reason is None
    with pytest.raises(RevisionConflict) as stale:
        alice.update_memory(memory.memory_id, 7, content="Answer in Go")
    assert (stale.value.reason, stale.value.current_revision) == ("revision_conflict", 1)
    with pytest.raises(KeyExists) as taken:
        alice.create_memory("language", "Answer in Go", "preference")
    assert taken.value.memory_id == str(memory.memory_id)
    with pytest.raises(ValidationError) as invalid:
        alice.list_memories(limit=500)
    assert invalid.value.status == 422 and invalid.value.errors
    with pytest.raises(SensitiveContent) as secret:
        alice.create_memory("key", "my password is hunter2hunter2", "fact")
    assert secret.value.reason == "sensitive_content"

    with MemLedger(base_url, "not-a-token") as stranger, pytest.raises(Unauthorized):
        stranger.list_memories()
    with MemLedger(base_url, token("alice", workspace="learning", mode="no_write")) as agent:
        with pytest.raises(Forbidden) as denied:
            agent.list_memories()
        assert denied.value.reason == "agent_token"
        with pytest.raises(Forbidden) as read_only:
            agent.tools.save_core_memory("k", "Likes tea", "preference")
        assert read_only.value.reason == "no_write_mode"
    with pytest.raises(Forbidden) as not_agent:
        alice.tools.list_core_memories()
    assert not_agent.value.reason == "workspace_required"
    with pytest.raises(Forbidden) as not_auditor:
        alice.audit.events()
    assert not_auditor.value.reason == "not_auditor"


def test_iter_memories_follows_the_cursor_across_pages(
    base_url: str, token: Token, requests: Requests
) -> None:
    with MemLedger(base_url, token(), http_client=requests.client(base_url)) as alice:
        made = {
            alice.create_memory(f"key_{n}", f"Fact number {n}", "fact").memory_id for n in range(7)
        }
        requests.sent.clear()
        listed = [memory.memory_id for memory in alice.iter_memories(limit=3, category="fact")]
    assert sorted(listed) == sorted(made) and len(listed) == 7
    pages = [path for method, path, _ in requests.sent if method == "GET"]
    assert pages == ["/me/core-memories"] * 3


def test_the_owner_search_ranks_memories_by_relevance(alice: MemLedger) -> None:
    alice.create_memory("language", "Answer in Python with examples", "preference")
    alice.create_memory("diet", "Vegetarian, no mushrooms", "fact")
    found = list(alice.iter_memories(q="python examples"))
    assert [m.memory_key for m in found][:1] == ["language"]
    assert found[0].relevance is not None and 0 < found[0].relevance <= 1


def test_candidates_are_proposed_accepted_and_rejected(
    alice: MemLedger, base_url: str, token: Token
) -> None:
    with MemLedger(base_url, token("alice", workspace="learning")) as agent:
        first = agent.tools.propose_core_memory("editor", "Uses Vim", "preference")
        second = agent.tools.propose_core_memory("tea", "Drinks green tea", "preference")
    assert first.status == second.status == "candidate_created"
    assert first.candidate is not None and second.candidate is not None
    pending = {c.candidate_id for c in alice.list_candidates()}
    assert pending == {first.candidate.candidate_id, second.candidate.candidate_id}

    decision = alice.accept_candidate(first.candidate.candidate_id, content="Uses Neovim")
    assert decision.candidate.status == "accepted"
    assert (decision.memory.content, decision.memory.source_type) == ("Uses Neovim", "confirmed")
    assert alice.reject_candidate(second.candidate.candidate_id).status == "rejected"
    with pytest.raises(CandidateDecided) as decided:
        alice.accept_candidate(second.candidate.candidate_id)
    assert (decided.value.reason, decided.value.candidate_status) == (
        "candidate_decided",
        "rejected",
    )
    assert alice.list_candidates() == []


def test_settings_switch_the_agent_tools_off(alice: MemLedger, base_url: str, token: Token) -> None:
    assert alice.get_settings().saved_memory_enabled is True
    settings = alice.update_settings(saved_memory_enabled=False)
    assert (settings.saved_memory_enabled, settings.auto_extract_enabled) == (False, True)
    agent = MemLedger(base_url, token("alice", workspace="learning"))
    with agent, pytest.raises(Forbidden) as disabled:
        agent.tools.search_core_memories("anything")
    assert disabled.value.reason == "memory_disabled"


def test_the_legacy_endpoints_put_list_and_forget_global_memories(alice: MemLedger) -> None:
    put = alice.put_global_memory("language", "Answer in Python", "preference")
    assert (put.memory_key, put.content) == ("language", "Answer in Python")
    alice.put_global_memory("language", "Answer in Rust", "preference")
    assert [m.content for m in alice.list_global_memories()] == ["Answer in Rust"]
    alice.forget_global_memory("language")
    assert alice.list_global_memories() == []
    with pytest.raises(NotFound):
        alice.forget_global_memory("language")


def test_auditors_page_the_trail_replay_the_ledger_and_look_back_in_time(
    alice: MemLedger, base_url: str, token: Token
) -> None:
    memory = alice.create_memory("language", "Answer in Python", "preference")
    before_update = datetime.now(UTC)
    alice.update_memory(memory.memory_id, 1, content="Answer in Rust")
    with MemLedger(base_url, token("auditor", roles=["auditor"])) as auditor:
        trail = list(auditor.audit.iter_events(limit=1, memory_id=memory.memory_id))
        replayed = list(auditor.audit.replay(user_id="alice", memory_id=memory.memory_id))
        then = auditor.audit.memories_as_of("alice", before_update)
    assert [e.event_type for e in trail] == ["memory.created", "memory.updated"]
    assert all(e.user_id == "alice" and e.content_hash for e in trail)
    assert [r.data.get("content") for r in replayed if r.aggregate == "memory"] == [
        "Answer in Python",
        "Answer in Rust",
    ]
    assert [(m.memory_id, m.content, m.revision) for m in then.items] == [
        (memory.memory_id, "Answer in Python", 1)
    ]


def test_an_agent_runtime_lists_the_tools_and_forwards_a_models_calls(
    base_url: str, token: Token
) -> None:
    with MemLedger(base_url, token("alice", workspace="learning")) as agent:
        names = [tool.name for tool in agent.tools.definitions()]
        functions = agent.tools.function_definitions()
        saved = agent.tools.call(
            "save_core_memory",
            {
                "memory_key": "language",
                "content": "Answer in Python",
                "category": "preference",
                "scope_type": "workspace",
            },
        )
        found = agent.tools.search_core_memories("python", limit=3)
        updated = agent.tools.update_core_memory(saved["memory"]["memory_id"], category="fact")
        with pytest.raises(ValidationError) as unknown_field:  # no naming another user
            agent.tools.call("list_core_memories", {"user_id": "bob"})
    assert names == [
        "search_core_memories",
        "list_core_memories",
        "save_core_memory",
        "update_core_memory",
        "forget_core_memory",
        "propose_core_memory",
    ]
    assert [f["function"]["name"] for f in functions] == names
    assert saved["status"] == "created" and saved["memory"]["workspace_type"] == "learning"
    assert [hit.memory_key for hit in found.items] == ["language"] and found.total_tokens > 0
    assert (updated.status, updated.memory.category, updated.memory.revision) == (
        "updated",
        "fact",
        2,
    )
    assert unknown_field.value.status == 422
