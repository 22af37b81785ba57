"""The SDK's retry rules on answers a live server cannot be made to give on demand (a 429, a
503 after a forget went through, a refused connection), with an httpx2 mock transport in
front; and its Server-Sent Events decoder. The 503 of a lagging server: test_retries.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx2
import pytest

from memledger_client import (
    Forgotten,
    MemLedger,
    RateLimited,
    Retries,
    TransportFailed,
    Unavailable,
)
from memledger_client._sse import EventDecoder
from memledger_client.errors import retry_after_seconds

Answer = Callable[[httpx2.Request], httpx2.Response]
FAST = Retries(max_retries=3, backoff=0.01, max_backoff=0.02)
MEMORY = {
    "memory_id": str(uuid.uuid4()),
    "memory_key": "language",
    "content": "Answer in Python",
    "category": "preference",
    "scope_type": "global",
    "workspace_type": None,
    "source_type": "explicit",
    "status": "active",
    "revision": 1,
    "created_at": "2026-12-03T10:00:00Z",
    "updated_at": "2026-12-03T10:00:00Z",
    "last_confirmed_at": None,
    "review_after": None,
    "expires_at": None,
}


def scripted(*answers: Answer) -> tuple[MemLedger, list[httpx2.Request]]:
    """A client whose requests get these answers in turn (the last one repeats)."""
    seen: list[httpx2.Request] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1](request)

    http = httpx2.Client(base_url="http://memledger.test", transport=httpx2.MockTransport(handle))
    return MemLedger("http://memledger.test", "token", retries=FAST, http_client=http), seen


def status(code: int, body: dict[str, object] | None = None, retry_after: str = "") -> Answer:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return lambda _: httpx2.Response(code, json=body or {"detail": "x"}, headers=headers)


def refused(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("connection refused", request=request)


def reset(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadError("connection reset by peer", request=request)


def test_a_429_is_retried_even_for_the_unguarded_write() -> None:
    client, seen = scripted(
        status(429, retry_after="0"), status(200, {"status": "updated", "memory": MEMORY})
    )
    assert client.tools.update_core_memory(uuid.uuid4(), content="x").status == "updated"
    assert len(seen) == 2


def test_a_forget_whose_first_attempt_got_a_503_is_done_when_the_retry_finds_it_gone() -> None:
    client, seen = scripted(status(503, retry_after="0"), status(410, {"reason": "forgotten"}))
    assert client.forget_memory(uuid.uuid4()) is None
    assert len(seen) == 2
    tool, _ = scripted(status(503, retry_after="0"), status(410, {"reason": "forgotten"}))
    assert tool.tools.forget_core_memory(uuid.uuid4()).status == "forgotten"


def test_a_forget_of_a_memory_already_gone_is_still_forgotten() -> None:
    client, seen = scripted(status(429, retry_after="0"), status(410, {"reason": "forgotten"}))
    with pytest.raises(Forgotten):  # the 429 was refused unrun: the memory was gone before
        client.forget_memory(uuid.uuid4())
    assert len(seen) == 2


def test_a_refused_connection_is_retried_for_any_call_a_lost_one_only_when_safe() -> None:
    client, seen = scripted(refused, status(200, {"status": "updated", "memory": MEMORY}))
    assert client.tools.update_core_memory(uuid.uuid4(), content="x").status == "updated"
    assert len(seen) == 2
    client, seen = scripted(reset, status(200, {"status": "updated", "memory": MEMORY}))
    with pytest.raises(TransportFailed) as failed:
        client.tools.update_core_memory(uuid.uuid4(), content="x")
    assert isinstance(failed.value.__cause__, httpx2.ReadError) and len(seen) == 1
    client, seen = scripted(reset, status(200, MEMORY))
    assert client.get_memory(uuid.uuid4()).content == "Answer in Python"


def test_retries_end_with_the_last_error_and_its_retry_after() -> None:
    client, seen = scripted(status(429, retry_after="0"))
    with pytest.raises(RateLimited) as limited:
        client.list_memories()
    assert (limited.value.retry_after, len(seen)) == (0.0, 4)
    client, seen = scripted(status(503, retry_after="3600"))
    with pytest.raises(Unavailable):  # an hour is past the waiting budget: no wait at all
        client.list_memories()
    assert len(seen) == 1


def test_retry_after_reads_seconds_and_http_dates() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)

    def after(value: str) -> float | None:
        return retry_after_seconds(httpx2.Response(503, headers={"Retry-After": value}))

    assert after("7") == 7.0
    assert 25 < (after(soon) or 0) <= 30
    assert after("soon") is None


def test_the_event_decoder_joins_data_lines_and_skips_heartbeats() -> None:
    decoder = EventDecoder()
    lines = [": ping", "", "id: c1", "event: memory.created", "data: {", "data: }", "", "retry: 50"]
    events = [e for e in map(decoder.feed, [*lines, ""]) if e is not None]
    assert [(e.id, e.event, e.data) for e in events] == [("c1", "memory.created", "{\n}")]
    assert decoder.retry == 50
