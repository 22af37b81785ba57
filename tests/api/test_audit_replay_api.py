"""Auditor replay over HTTP: auditors only, the command's filters, redaction, its own access
record, and the very lines `memledger replay` prints for the same ledger."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.access_log import AccessLog
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import PARTITION_BITS
from replay import replay_events
from tests.conftest import command_env
from tests.replay.command import replay_cli, run_replay

pytestmark = pytest.mark.integration

Auth = Callable[..., dict[str, str]]
BASE = "/me/core-memories"
REPLAY = "/audit/replay"
SECRET = "zqsecret-Zürich-7c1"


def as_of_url(user: str) -> str:
    return f"/audit/users/{user}/memories"


@pytest.fixture
def auditor(auth: Auth) -> dict[str, str]:
    return auth("audrey", roles=["auditor"])


@pytest.fixture
def ledger_story(client: TestClient, auth: Auth) -> dict[str, Any]:
    """alice: one memory kept and corrected, one forgotten; bob: one memory (real times)."""

    def create(user: str, key: str, content: str) -> str:
        body = {"memory_key": key, "content": content, "category": "fact", "scope_type": "global"}
        response = client.post(BASE, json=body, headers=auth(user))
        assert response.status_code == 201, response.text
        return str(response.json()["memory_id"])

    start = datetime.now(UTC)
    kept = create("alice", "drink", "café crème")
    gone = create("alice", "city", SECRET)
    after_gone = datetime.now(UTC)
    bob = create("bob", "drink", "water")
    patched = client.patch(
        f"{BASE}/{kept}", json={"expected_revision": 1, "content": "tea"}, headers=auth("alice")
    )
    assert patched.status_code == 200, patched.text
    before_forget = datetime.now(UTC)
    assert client.delete(f"{BASE}/{gone}", headers=auth("alice")).status_code == 204
    return {
        "start": start,
        "kept": kept,
        "gone": gone,
        "bob": bob,
        "after_gone": after_gone,
        "before_forget": before_forget,
    }


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


# -- who may ask -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [REPLAY, as_of_url("alice") + "?as_of=2026-01-01T00:00:00Z"])
def test_only_auditors_replay(client: TestClient, auth: Auth, url: str) -> None:
    assert client.get(url).status_code == 401
    assert client.get(url, headers={"Authorization": "Bearer nonsense"}).status_code == 401
    denied = client.get(url, headers=auth("alice"))
    assert denied.status_code == 403
    assert denied.json()["reason"] == "not_auditor"
    assert isinstance(denied.json()["detail"], str)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "query.since"),
        ({"before": "2026-13-01"}, "query.before"),
        ({"memory": "not-a-uuid"}, "query.memory"),
        ({"after": "-1"}, "query.after"),
        ({"until": "-5"}, "query.until"),
        ({"user": ""}, "query.user"),
    ],
)
def test_bad_filters_are_422_in_the_contract_shape(
    client: TestClient, auth: Auth, params: dict[str, str], field: str
) -> None:
    for headers in (auth("audrey", roles=["auditor"]), auth("alice")):  # validation before policy
        response = client.get(REPLAY, params=params, headers=headers)
        assert response.status_code == 422, response.text
        body = response.json()
        assert isinstance(body["detail"], str) and field in body["detail"]
        assert [e["field"] for e in body["errors"]] == [field]


def test_as_of_needs_a_valid_time(client: TestClient, auditor: dict[str, str]) -> None:
    for params in ({}, {"as_of": "soon"}):
        response = client.get(as_of_url("alice"), params=params, headers=auditor)
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["field"] == "query.as_of"
    assert (
        "ISO 8601"
        in client.get(as_of_url("alice"), params={"as_of": "soon"}, headers=auditor).json()[
            "detail"
        ]
    )


# -- the filters -------------------------------------------------------------------------------


def test_each_filter_keeps_what_the_replay_package_keeps(
    client: TestClient, auditor: dict[str, str], ledger: MemoryLedger, ledger_story: dict[str, Any]
) -> None:
    story = ledger_story
    everything = lines(client.get(REPLAY, headers=auditor))
    assert len(everything) == ledger.recorded()
    for user in {r["user_id"] for r in everything}:  # each user's events in their order
        positions = [r["position"] for r in everything if r["user_id"] == user]
        assert positions == sorted(set(positions))

    head = ledger.position("alice")
    alice = lines(client.get(REPLAY, params={"user": "alice", "until": head}, headers=auditor))
    assert alice and {r["user_id"] for r in alice} == {"alice"}
    assert alice == list(replay_events(ledger, user_id="alice", until=head))

    one = lines(client.get(REPLAY, params={"memory": story["kept"]}, headers=auditor))
    assert {r["aggregate_id"] for r in one if r["aggregate"] == "memory"} == {story["kept"]}
    assert [r["event_type"] for r in one if r["aggregate"] == "memory"] == [
        "memory.created",
        "memory.updated",
    ]

    # Positions order one partition: `after`/`until` read the partition they name.
    mine = [r["position"] for r in alice]
    window = lines(client.get(REPLAY, params={"after": mine[1], "until": mine[3]}, headers=auditor))
    assert [r["position"] for r in window if r["user_id"] == "alice"] == mine[2:4]
    assert all(mine[1] < r["position"] <= mine[3] for r in window)

    since = story["after_gone"].isoformat()
    before = story["before_forget"].replace(tzinfo=None).isoformat()  # no offset: UTC
    timed = lines(client.get(REPLAY, params={"since": since, "before": before}, headers=auditor))
    assert timed and all(
        since <= r["occurred_at"] < story["before_forget"].isoformat() for r in timed
    )
    assert timed == list(
        replay_events(ledger, since=story["after_gone"], before=story["before_forget"])
    )
    assert {r["aggregate_id"] for r in timed if r["aggregate"] == "memory"} == {
        story["bob"],
        story["kept"],
    }


# -- forgotten content -------------------------------------------------------------------------


def test_forgotten_content_is_redacted_in_both_views(
    client: TestClient, auditor: dict[str, str], ledger_story: dict[str, Any]
) -> None:
    story = ledger_story
    response = client.get(REPLAY, params={"memory": story["gone"]}, headers=auditor)
    assert SECRET not in response.text and "Zürich" not in response.text
    memory_events = [r for r in lines(response) if r["aggregate"] == "memory"]
    assert memory_events[0]["redacted"] is True
    assert "content" not in memory_events[0]["data"]
    assert "memory_key" not in memory_events[0]["data"]

    at = story["before_forget"].isoformat()
    view = client.get(as_of_url("alice"), params={"as_of": at}, headers=auditor)
    assert view.status_code == 200, view.text
    assert SECRET not in view.text
    items = {item["memory_id"]: item for item in view.json()["items"]}
    assert items[story["gone"]]["redacted"] is True
    assert items[story["gone"]]["content"] is None and items[story["gone"]]["memory_key"] is None
    assert (items[story["kept"]]["content"], items[story["kept"]]["revision"]) == ("tea", 2)
    assert items[story["kept"]]["redacted"] is False

    now = client.get(
        as_of_url("alice"),
        params={"as_of": story["before_forget"] + timedelta(hours=1)},
        headers=auditor,
    )
    assert [item["memory_id"] for item in now.json()["items"]] == [story["kept"]]


def test_as_of_before_anything_and_of_one_memory(
    client: TestClient, auditor: dict[str, str], ledger_story: dict[str, Any]
) -> None:
    story = ledger_story
    early = (story["start"] - timedelta(days=1)).isoformat()
    assert (
        client.get(as_of_url("alice"), params={"as_of": early}, headers=auditor).json()["items"]
        == []
    )
    at = story["before_forget"].isoformat()
    one = client.get(
        as_of_url("alice"), params={"as_of": at, "memory": story["kept"]}, headers=auditor
    ).json()
    assert [item["memory_id"] for item in one["items"]] == [story["kept"]]
    assert one["user_id"] == "alice" and one["as_of"] == at


# -- each read is itself recorded --------------------------------------------------------------


@pytest.fixture
def access_log(services: Services, ledger: MemoryLedger) -> Iterator[AccessLog]:
    services.access_log = AccessLog(ledger, interval=0.01)
    yield services.access_log
    services.access_log.close()


def access_records(ledger: MemoryLedger, after: int) -> list[dict[str, Any]]:
    return [r for r in replay_events(ledger, after=after) if r["aggregate"] == "access"]


def test_each_auditor_read_is_an_access_record(
    client: TestClient,
    auth: Auth,
    auditor: dict[str, str],
    ledger: MemoryLedger,
    ledger_story: dict[str, Any],
    access_log: AccessLog,
) -> None:
    story = ledger_story
    assert access_log.flush()
    head = ledger.position("audrey")  # the auditor's reads are recorded as theirs

    headers = auditor | {"X-Request-ID": "audit-replay-1"}
    lines(client.get(REPLAY, params={"user": "alice"}, headers=headers))
    assert access_log.flush()
    records = access_records(ledger, head)
    assert {r["event_type"] for r in records} == {"memory.read"}
    assert {r["user_id"] for r in records} == {"audrey"}  # who read: the auditor
    assert {r["request_id"] for r in records} == {"audit-replay-1"}
    assert {r["data"]["tool"] for r in records} == {"audit.replay"}
    assert [r["data"]["memory_id"] for r in records] == [story["kept"], story["gone"]]

    head = ledger.position("audrey")
    at = story["before_forget"].isoformat()
    view = client.get(
        as_of_url("alice"), params={"as_of": at}, headers=auditor | {"X-Request-ID": "as-of-1"}
    )
    assert view.status_code == 200
    assert access_log.flush()
    records = access_records(ledger, head)
    assert {(r["data"]["tool"], r["request_id"]) for r in records} == {("audit.as_of", "as-of-1")}
    assert sorted(r["data"]["memory_id"] for r in records) == sorted([story["kept"], story["gone"]])

    head = ledger.recorded()
    denied = client.get(REPLAY, headers=auth("alice"))
    assert denied.status_code == 403
    assert access_log.flush()
    assert ledger.recorded() == head  # a refused request showed nothing


# -- the same lines as the command -------------------------------------------------------------


@pytest.mark.slow  # ~7 s
def test_http_answers_the_lines_the_command_prints(
    client: TestClient,
    auditor: dict[str, str],
    ledger: MemoryLedger,
    ledger_story: dict[str, Any],
    database_url: str,
    pg_schema: str,
    master_key: str,
) -> None:
    story = ledger_story
    cli, env = replay_cli(), command_env(database_url, pg_schema, master_key)

    def command(*args: str) -> list[str]:
        result = run_replay(cli, env, *args)
        assert result.exit_code == 0, (result.output, result.exception)
        return result.stdout.splitlines()

    since = story["after_gone"]
    head = ledger.position("alice")  # `after`/`until`: three events of alice's partition
    filters: list[dict[str, str]] = [
        {},
        {"user": "alice"},
        {"memory": story["gone"]},
        {"after": str(head - (3 << PARTITION_BITS)), "until": str(head)},
        {"since": since.isoformat(), "before": story["before_forget"].isoformat()},
        {"user": "bob", "since": since.replace(tzinfo=None).isoformat()},
    ]
    for params in filters:
        http = client.get(REPLAY, params=params, headers=auditor)
        assert http.status_code == 200
        args = [part for name, value in params.items() for part in (f"--{name}", value)]
        assert http.text.splitlines() == command(*args), params

    at = story["before_forget"].isoformat()
    view = client.get(as_of_url("alice"), params={"as_of": at}, headers=auditor).json()
    printed = command("--user", "alice", "--as-of", at)
    assert [json.dumps(item, ensure_ascii=False) for item in view["items"]] == printed
