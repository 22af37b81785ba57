"""Read-your-writes and retries against live servers whose projections lag for real: a read
that must show a write the projections have not applied yet is answered 503 with Retry-After.

Two servers share one ledger (like two processes); their projection worker starts only when
the SDK logs its first retry, so what is asserted never depends on timing.
"""

from __future__ import annotations

import logging

import pytest

from memledger_client import MemLedger, Retries, Unavailable
from memledger_client._base import _older
from tests.clients.conftest import Requests, Stalled, Token


def test_a_read_on_another_server_waits_for_the_write_and_retries_its_503(
    stalled: Stalled,
    token: Token,
    requests: Requests,
    retry_log: list[logging.LogRecord],
    start_on_retry: None,
) -> None:
    with MemLedger(stalled.writer, token()) as writer:
        memory = writer.create_memory("language", "Answer in Python", "preference")
    assert writer.position is not None

    # Without the position the other server answers at once, from projections without it:
    with MemLedger(stalled.reader, token(), read_your_writes=False) as blind:
        assert blind.list_memories().items == []
    assert retry_log == []

    http = requests.client(stalled.reader)
    with MemLedger(stalled.reader, token(), http_client=http) as reader:
        reader.position = writer.position  # carried over, as from another process
        page = reader.list_memories()
    assert [m.memory_id for m in page.items] == [memory.memory_id]
    sent = [headers.get("X-Min-Position") for _, _, headers in requests.sent]
    assert len(sent) >= 2 and set(sent) == {writer.position}
    assert "answered 503" in retry_log[0].getMessage()


def test_every_request_of_a_client_carries_its_latest_write_position(
    alice: MemLedger, base_url: str, token: Token, requests: Requests
) -> None:
    with MemLedger(base_url, token(), http_client=requests.client(base_url)) as client:
        client.list_memories()
        first = client.create_memory("language", "Answer in Python", "preference")
        after_create = client.position
        client.update_memory(first.memory_id, 1, content="Answer in Rust")
        client.get_memory(first.memory_id)
    positions = [headers.get("X-Min-Position") for _, _, headers in requests.sent]
    assert positions[:2] == [None, None]
    assert positions[2] == after_create and positions[3] == client.position
    assert client.position != after_create  # the update's, later in the user's partition
    assert _older(after_create or "", client.position or "")


def test_retries_stop_at_the_budget_and_raise_the_last_503(
    stalled: Stalled, token: Token, requests: Requests, retry_log: list[logging.LogRecord]
) -> None:
    with MemLedger(stalled.writer, token()) as writer:
        writer.create_memory("language", "Answer in Python", "preference")
        http = requests.client(stalled.writer)
        reader = MemLedger(
            stalled.writer, token(), retries=Retries(max_retries=2), http_client=http
        )
        reader.position = writer.position
        with reader, pytest.raises(Unavailable) as unavailable:
            reader.get_memory(writer.create_memory("diet", "Vegetarian", "fact").memory_id)
    assert (unavailable.value.status, unavailable.value.retry_after) == (503, 1.0)
    assert len(requests.sent) == 3 and len(retry_log) == 2


def test_the_waiting_budget_ends_a_call_before_a_pause_would_overrun_it(
    stalled: Stalled, token: Token, requests: Requests
) -> None:
    retries = Retries(max_retries=5, max_wait=1.5)  # Retry-After is 1 s: one pause fits
    with MemLedger(stalled.writer, token()) as writer:
        writer.create_memory("language", "Answer in Python", "preference")
    with MemLedger(
        stalled.writer, token(), retries=retries, http_client=requests.client(stalled.writer)
    ) as client:
        client.position = writer.position
        with pytest.raises(Unavailable):
            client.list_memories()
    assert len(requests.sent) == 2


def test_an_unguarded_tool_write_is_not_repeated_after_a_503_but_a_tool_read_is(
    stalled: Stalled,
    token: Token,
    requests: Requests,
    retry_log: list[logging.LogRecord],
    start_on_retry: None,
) -> None:
    with MemLedger(stalled.writer, token()) as owner:
        memory = owner.create_memory("language", "Answer in Python", "preference")
    agent_token = token(workspace="learning")
    http = requests.client(stalled.writer)
    with MemLedger(stalled.writer, agent_token, http_client=http) as agent:
        with pytest.raises(Unavailable):  # update_core_memory has no expected revision
            agent.tools.update_core_memory(memory.memory_id, content="Answer in Rust")
        assert len(requests.sent) == 1 and retry_log == []
        listed = agent.tools.list_core_memories()  # a read: retried until the worker runs
    assert [m.content for m in listed] == ["Answer in Python"]
    assert len(requests.sent) >= 3 and retry_log
