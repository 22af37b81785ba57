"""The change feed, `GET /me/changes`: the owner's memory and candidate changes in order, ids and
types only, as JSON pages (TestClient) and as Server-Sent Events (a real uvicorn in a thread)."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
import uvicorn
from fastapi.testclient import TestClient

from api.app import create_app
from api.limits import UserLimits
from api.services import Services

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
FEED = "/me/changes"
ITEM_FIELDS = {"cursor", "event_type", "memory_id", "candidate_id", "revision", "occurred_at"}
SECRET_WORDS = ("marmalade", "breakfast_spread")  # content and key: never in the feed


def remember(client: Any, auth: Auth, user: str = "alice", **fields: Any) -> Any:
    body = {
        "memory_key": "breakfast_spread",
        "content": "I like marmalade on toast",
        "category": "preference",
        "scope_type": "global",
    } | fields
    response = client.post(BASE, json=body, headers=auth(user))
    assert response.status_code == 201, response.text
    return response.json()


def start(client: Any, auth: Auth, user: str = "alice") -> str:
    """The cursor of now."""
    response = client.get(FEED, headers=auth(user))
    assert response.status_code == 200, response.text
    assert response.json()["items"] == []
    return str(response.json()["next_after"])


def page(client: Any, auth: Auth, after: str, user: str = "alice", **params: Any) -> Any:
    response = client.get(FEED, params={"after": after, **params}, headers=auth(user))
    assert response.status_code == 200, response.text
    assert not any(word in response.text for word in SECRET_WORDS)
    return response.json()


def lifecycle(client: Any, auth: Auth, user: str = "alice") -> str:
    """Create, correct, suppress, restore and forget one memory; its id."""
    memory = remember(client, auth, user)
    memory_id = memory["memory_id"]
    url = f"{BASE}/{memory_id}"
    assert client.patch(
        url, json={"expected_revision": 1, "content": "marmalade, thick cut"}, headers=auth(user)
    ).is_success
    assert client.post(f"{url}/suppress", headers=auth(user)).is_success
    assert client.post(f"{url}/restore", headers=auth(user)).is_success
    assert client.delete(url, headers=auth(user)).status_code == 204
    return str(memory_id)


# -- JSON pages --------------------------------------------------------------------------------


def test_a_memory_s_life_shows_in_order_ids_and_types_only(client: TestClient, auth: Auth) -> None:
    after = start(client, auth)
    memory_id = lifecycle(client, auth)

    found = page(client, auth, after)

    assert [(i["event_type"], i["revision"]) for i in found["items"]] == [
        ("memory.created", 1),
        ("memory.updated", 2),
        ("memory.suppressed", 2),
        ("memory.restored", 2),
        ("memory.deleted", 2),
    ]
    assert all(set(i) == ITEM_FIELDS for i in found["items"])
    assert {i["memory_id"] for i in found["items"]} == {memory_id}
    assert found["next_after"] == found["items"][-1]["cursor"]
    assert page(client, auth, found["next_after"]) == {
        "items": [],
        "next_after": found["next_after"],
    }


def test_candidates_show_with_their_ids(client: TestClient, auth: Auth) -> None:
    after = start(client, auth)
    agent = auth("alice", workspace="learning")
    proposed = client.post(
        "/tools/propose_core_memory",
        json={
            "memory_key": "breakfast_spread",
            "content": "I like marmalade on toast",
            "category": "preference",
            "scope_type": "global",
        },
        headers=agent,
    )
    assert proposed.status_code == 200, proposed.text
    candidate_id = proposed.json()["candidate"]["candidate_id"]
    accepted = client.post(f"/me/memory-candidates/{candidate_id}/accept", json={}, headers=auth())
    assert accepted.status_code == 200, accepted.text

    items = page(client, auth, after)["items"]

    assert [(i["event_type"], i["candidate_id"]) for i in items] == [
        ("memory.candidate_created", candidate_id),
        ("memory.created", None),
        ("memory.candidate_accepted", candidate_id),
    ] or [(i["event_type"], i["candidate_id"]) for i in items] == [
        ("memory.candidate_created", candidate_id),
        ("memory.candidate_accepted", candidate_id),
        ("memory.created", None),
    ]
    assert items[-1]["memory_id"] == accepted.json()["memory"]["memory_id"]


def test_nothing_of_another_user_nor_reads(client: TestClient, auth: Auth) -> None:
    after = start(client, auth)
    lifecycle(client, auth, "bob")
    mine = remember(client, auth)
    assert client.get(f"{BASE}/{mine['memory_id']}", headers=auth()).is_success

    items = page(client, auth, after)["items"]

    assert [(i["event_type"], i["memory_id"]) for i in items] == [
        ("memory.created", mine["memory_id"])
    ]


def test_pages_walk_every_change_once(client: TestClient, auth: Auth) -> None:
    after = start(client, auth)
    lifecycle(client, auth)
    everything = page(client, auth, after)["items"]
    seen: list[Any] = []
    while True:
        found = page(client, auth, after, limit=2)
        if not found["items"]:
            break
        assert len(found["items"]) <= 2
        seen += found["items"]
        after = found["next_after"]

    assert seen == everything and len(seen) == 5


@pytest.mark.parametrize(
    "params",
    [
        {"after": "bm90LWEtY3Vyc29y"},  # base64 of "not-a-cursor"
        {"after": "WyJxMSIsMC41LCJ4Il0"},  # another kind of cursor
        {"after": "has space"},
        {"limit": 0},
        {"limit": 1001},
    ],
)
def test_a_bad_cursor_or_limit_is_422(client: TestClient, auth: Auth, params: Any) -> None:
    response = client.get(FEED, params=params, headers=auth())
    assert response.status_code == 422 and isinstance(response.json()["detail"], str)


def test_a_bad_last_event_id_is_422_before_any_stream(client: TestClient, auth: Auth) -> None:
    headers = auth() | {"Accept": "text/event-stream", "Last-Event-ID": "bm90LWEtY3Vyc29y"}
    response = client.get(FEED, headers=headers)
    assert response.status_code == 422


@pytest.mark.parametrize("claims", [{"mode": "no_write"}, {"tools": ["search_core_memories"]}])
def test_agent_turn_tokens_are_403(client: TestClient, auth: Auth, claims: Any) -> None:
    response = client.get(FEED, headers=auth("alice", workspace="learning", **claims))
    assert response.status_code == 403 and response.json()["reason"] == "agent_token"


def test_no_token_is_401(client: TestClient) -> None:
    assert client.get(FEED).status_code == 401


# -- Server-Sent Events ------------------------------------------------------------------------


class Served:
    """The app under uvicorn in a thread; `url`, `server`."""

    def __init__(self, services: Services) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(create_app(services), host="127.0.0.1", port=port)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def served(services: Services) -> Iterator[Served]:
    services.feed_poll = 0.05
    services.feed_heartbeat = 0.2
    running = Served(services)
    yield running
    running.stop()


@pytest.fixture
def http(served: Served) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=served.url, timeout=30) as client:
        yield client


def read_events(lines: Iterator[str], wanted: int) -> tuple[list[dict[str, str]], int]:
    """Events (id, event, data) until `wanted` of them, and the heartbeat comments seen."""
    events: list[dict[str, str]] = []
    beats = 0
    current: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            beats += 1
        elif not line:
            if current:
                events.append(current)
                current = {}
        else:
            name, _, value = line.partition(":")
            current[name] = value[1:] if value.startswith(" ") else value
        if len(events) >= wanted:
            break
    return events, beats


def stream(
    http: httpx2.Client, auth: Auth, params: dict[str, str] | None = None, **headers: str
) -> Any:
    headers = auth("alice") | {"Accept": "text/event-stream"} | headers
    return http.stream("GET", FEED, params=params, headers=headers)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_stream_delivers_each_change_once_across_a_reconnect(
    http: httpx2.Client, auth: Auth, services: Services
) -> None:
    after = start(http, auth)
    first = remember(http, auth, memory_key="a")  # before the stream opens: delivered from `after`
    with stream(http, auth, {"after": after}) as response:  # as a client that saw `after`
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        lifecycle(http, auth, "bob")  # another user's changes, interleaved
        second = remember(http, auth, memory_key="b")
        seen, _ = read_events(lines, 2)
    assert wait_until(lambda: services.limits.in_flight("alice", "stream") == 0)
    third = remember(http, auth, memory_key="c")
    http.delete(f"{BASE}/{first['memory_id']}", headers=auth())
    with stream(http, auth, **{"Last-Event-ID": seen[-1]["id"]}) as response:
        more, _ = read_events(response.iter_lines(), 2)
    every = page(http, auth, after)["items"]

    delivered = seen + more
    assert [e["id"] for e in delivered] == [i["cursor"] for i in every]
    assert [(e["event"], json.loads(e["data"])) for e in delivered] == [
        (i["event_type"], i) for i in every
    ]
    assert [json.loads(e["data"])["memory_id"] for e in delivered] == [
        first["memory_id"],
        second["memory_id"],
        third["memory_id"],
        first["memory_id"],
    ]
    assert delivered[-1]["event"] == "memory.deleted"
    assert not any(w in e["data"] for e in delivered for w in SECRET_WORDS)


def test_an_idle_stream_sends_heartbeats(http: httpx2.Client, auth: Auth) -> None:
    with stream(http, auth) as response:
        lines = response.iter_lines()
        beats = 0
        for line in lines:
            beats += line.startswith(":")
            if beats == 2:
                break
    assert beats == 2


def test_a_stream_holds_one_of_the_user_s_stream_slots(
    http: httpx2.Client, auth: Auth, services: Services
) -> None:
    services.limits = UserLimits(streams=1)
    with stream(http, auth) as response:
        assert response.status_code == 200
        lines = response.iter_lines()  # kept: a dropped iterator closes the stream
        next(lines)  # the stream is open
        refused = http.get(FEED, headers=auth() | {"Accept": "text/event-stream"})
        assert http.get(FEED, headers=auth()).status_code == 200  # JSON pages are not streams
        assert services.limits.in_flight("alice", "stream") == 1
    assert refused.status_code == 429 and "Retry-After" in refused.headers
    assert wait_until(lambda: services.limits.in_flight("alice", "stream") == 0)


def test_server_shutdown_ends_a_stream_cleanly(served: Served, auth: Auth) -> None:
    with httpx2.Client(base_url=served.url, timeout=30) as http:
        with stream(http, auth) as response:
            lines = response.iter_lines()
            next(lines)
            # What uvicorn's SIGTERM handler does, with the handler where sse-starlette looks.
            previous = signal.signal(signal.SIGTERM, served.server.handle_exit)
            try:
                served.server.should_exit = True
                rest = list(lines)  # ends: the server closed the stream
            finally:
                signal.signal(signal.SIGTERM, previous)
        served.thread.join(timeout=30)
    assert not served.thread.is_alive()
    assert all(line.startswith(":") or not line for line in rest)
