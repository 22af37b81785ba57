"""`AsyncMemLedger` against a live server: the same calls awaited, its iterators async, its
retries and read-your-writes as the sync client's."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from memledger_client import (
    AsyncMemLedger,
    Forgotten,
    KeyExists,
    NotFound,
    Retries,
    RevisionConflict,
    Unavailable,
)
from tests.clients.conftest import Requests, Stalled, Token


def test_a_memory_round_trip_awaited(base_url: str, token: Token) -> None:
    async def scenario() -> None:
        async with AsyncMemLedger(base_url, token()) as alice:
            memory = await alice.create_memory("language", "Answer in Python", "preference")
            assert await alice.get_memory(memory.memory_id) == memory
            updated = await alice.update_memory(memory.memory_id, 1, category="fact")
            assert (updated.revision, updated.category) == (2, "fact")
            assert len(await alice.list_versions(memory.memory_id)) == 2
            assert (await alice.suppress_memory(memory.memory_id)).status == "suppressed"
            assert (await alice.restore_memory(memory.memory_id)).status == "active"
            await alice.forget_memory(memory.memory_id)
            with pytest.raises(Forgotten) as gone:
                await alice.get_memory(memory.memory_id)
            assert gone.value.reason == "forgotten"

    asyncio.run(scenario())


def test_errors_are_raised_with_their_reason_awaited(base_url: str, token: Token) -> None:
    async def scenario() -> None:
        async with AsyncMemLedger(base_url, token()) as alice:
            memory = await alice.create_memory("language", "Answer in Python", "preference")
            with pytest.raises(NotFound):
                await alice.get_memory(uuid.uuid4())
            with pytest.raises(RevisionConflict) as stale:
                await alice.restore_version(memory.memory_id, 1, expected_revision=5)
            assert stale.value.current_revision == 1
            with pytest.raises(KeyExists):
                await alice.create_memory("language", "Answer in Go", "preference")

    asyncio.run(scenario())


def test_async_iteration_pages_through_memories_and_the_audit_trail(
    base_url: str, token: Token, requests: Requests
) -> None:
    async def scenario() -> None:
        http = requests.async_client(base_url)
        async with AsyncMemLedger(base_url, token(), http_client=http) as alice:
            made = [
                (await alice.create_memory(f"key_{n}", f"Fact number {n}", "fact")).memory_id
                for n in range(5)
            ]
            requests.sent.clear()
            listed = [m.memory_id async for m in alice.iter_memories(limit=2)]
            assert sorted(listed) == sorted(made)
            assert len(requests.sent) == 3
        async with AsyncMemLedger(base_url, token("auditor", roles=["auditor"])) as auditor:
            events = [e async for e in auditor.audit.iter_events(limit=2, user_id="alice")]
            assert [e.event_type for e in events] == ["memory.created"] * 5
            assert {e.memory_id for e in events} == set(made)

    asyncio.run(scenario())


def test_the_agent_tools_awaited(base_url: str, token: Token) -> None:
    async def scenario() -> None:
        async with AsyncMemLedger(base_url, token(workspace="learning")) as agent:
            saved = await agent.tools.save_core_memory("language", "Answer in Python", "preference")
            assert saved.status == "created" and saved.memory is not None
            found = await agent.tools.search_core_memories("python")
            assert [hit.memory_id for hit in found.items] == [saved.memory.memory_id]
            replaced = await agent.tools.save_core_memory(
                "language", "Answer in Rust", "preference"
            )
            assert replaced.status == "candidate_created"
            forgotten = await agent.tools.forget_core_memory(saved.memory.memory_id)
            assert forgotten.status == "forgotten"
            assert await agent.tools.list_core_memories() == []

    asyncio.run(scenario())


def test_the_change_stream_awaited_resumes_from_a_cursor(base_url: str, token: Token) -> None:
    async def scenario() -> None:
        async with AsyncMemLedger(base_url, token()) as alice:
            start = (await alice.changes()).next_after
            first = await alice.create_memory("language", "Answer in Python", "preference")
            await alice.update_memory(first.memory_id, 1, content="Answer in Rust")
            stream = alice.stream_changes(start)
            seen = [await anext(stream), await anext(stream)]
            await stream.aclose()
            assert [c.event_type for c in seen] == ["memory.created", "memory.updated"]
            assert [c.cursor async for c in alice.iter_changes(seen[0].cursor)] == [seen[1].cursor]

    asyncio.run(scenario())


def test_a_503_is_retried_after_retry_after_awaited(
    stalled: Stalled, token: Token, retry_log: list[logging.LogRecord], start_on_retry: None
) -> None:
    async def scenario() -> None:
        async with AsyncMemLedger(stalled.writer, token()) as writer:
            memory = await writer.create_memory("language", "Answer in Python", "preference")
        async with AsyncMemLedger(stalled.reader, token()) as reader:
            reader.position = writer.position
            assert (await reader.get_memory(memory.memory_id)).content == "Answer in Python"

    asyncio.run(scenario())
    assert "answered 503" in retry_log[0].getMessage()


def test_an_exhausted_budget_raises_unavailable_awaited(stalled: Stalled, token: Token) -> None:
    async def scenario() -> None:
        retries = Retries(max_retries=1)
        async with AsyncMemLedger(stalled.writer, token(), retries=retries) as writer:
            await writer.create_memory("language", "Answer in Python", "preference")
            with pytest.raises(Unavailable) as unavailable:
                await writer.list_memories()
            assert unavailable.value.retry_after == 1.0

    asyncio.run(scenario())
