"""Auditor replay on PostgreSQL: every event in order, filtered, decrypted or redacted; as-of."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from domain.errors import MemoryForgotten
from domain.ledger.access import AccessHit, result_entries
from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import local_of, pack, partition_of
from domain.ledger.results import MemoryState
from domain.model.events import REDACTED
from domain.model.memory import Memory
from domain.model.values import Scope
from replay import as_of, replay_events
from tests.raw_events import insert_raw_event

pytestmark = pytest.mark.integration

LEARNING = Scope.workspace("learning")
GLOBAL = Scope.global_()


MEMORY_FIELDS = [f.name for f in fields(MemoryState) if f.name not in ("user_id", "versions")]


def shape(view: MemoryState) -> dict[str, Any]:
    """What as_of should say of a memory the ledger returned then."""

    def text(value: Any) -> Any:
        return value.isoformat() if isinstance(value, datetime) else value

    memory = {name: text(getattr(view, name)) for name in MEMORY_FIELDS}
    return memory | {"memory_id": str(view.memory_id), "redacted": False}


@dataclass
class History:
    """Ids, and for each moment: its time, the head of alice's partition and her memories then."""

    ids: dict[str, UUID] = field(default_factory=dict)
    moments: list[tuple[datetime, int, list[dict[str, Any]]]] = field(default_factory=list)

    def mark(self, ledger: MemoryLedger) -> datetime:
        memories = []
        for memory_id in (v for k, v in self.ids.items() if k.startswith("m")):
            with contextlib.suppress(MemoryForgotten):
                memories.append(shape(ledger.get_memory("alice", memory_id)))
        at = datetime.now(UTC)
        self.moments.append((at, ledger.position("alice"), memories))
        return at


def build(ledger: MemoryLedger, clock: Any) -> History:
    """Creates, updates, a version restore, suppress/restore, candidates, a rejection, a forget.

    Event timestamps come from the wall clock (the `clock` fixture only drives the ledger's
    rules), so each moment is marked with the wall-clock time after its commands.
    """
    h = History()
    h.moments.append((datetime.now(UTC), ledger.position("alice"), []))

    def create(user: str, key: str, content: str, scope: Scope = GLOBAL) -> UUID:
        outcome = ledger.create_memory(
            user, scope=scope, memory_key=key, content=content, category="preference"
        )
        assert outcome.memory is not None
        return outcome.memory.memory_id

    h.ids["m1"] = create("alice", "drink", "café au lait")
    h.ids["m2"] = create("alice", "style", "visual learner", LEARNING)
    h.ids["b1"] = create("bob", "drink", "water")
    h.mark(ledger)  # moment 1

    ledger.update_memory("alice", h.ids["m1"], expected_revision=1, content="tea, not coffee")
    ledger.suppress_memory("alice", h.ids["m2"])
    proposal = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=LEARNING,
        memory_key="goal",
        content="pass the exam",
        category="goal",
    ).candidate
    assert proposal is not None
    h.ids["c1"] = proposal.candidate_id
    h.mark(ledger)  # moment 2

    accepted = ledger.accept_candidate("alice", h.ids["c1"], content="pass the exam in June")
    assert accepted.memory is not None
    h.ids["m3"] = accepted.memory.memory_id
    review = clock.now + timedelta(days=90)
    ledger.update_memory("alice", h.ids["m1"], expected_revision=2, review_after=review)
    ledger.confirm_memory("alice", h.ids["m1"])
    ledger.restore_memory("alice", h.ids["m2"])
    ledger.change_settings("alice", auto_extract_enabled=False)
    h.mark(ledger)  # moment 3

    ledger.restore_version("alice", h.ids["m1"], revision=1, expected_revision=2)
    ledger.put_global_memory("alice", memory_key="drink", content="green tea", category="goal")
    rejected = ledger.propose_candidate(
        "bob",
        operation="create",
        scope=Scope.global_(),
        memory_key="diet",
        content="vegan",
        category="fact",
    ).candidate
    assert rejected is not None
    h.ids["c2"] = rejected.candidate_id
    ledger.reject_candidate("bob", h.ids["c2"])
    h.mark(ledger)  # moment 4

    ledger.forget_memory("alice", h.ids["m2"])
    h.mark(ledger)  # moment 5

    h.ids["m4"] = create("alice", "pet", "a cat called Miso")
    h.mark(ledger)  # moment 6
    return h


def insert_unknown_event(database_url: str, schema: str, partition: int) -> None:
    """An event of a later release, after alice's in her partition (it has no time of its own
    to merge by, so it stays behind her events)."""
    with psycopg.connect(database_url) as conn:
        insert_raw_event(conn, schema, "memledger:Future.Thing", b"{}", partition=partition)


def stored_positions(database_url: str, schema: str) -> list[int]:
    """Every stored event's packed position, each partition's in order."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT partition, position FROM {}.memledger_events ORDER BY 1, 2").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    return [pack(partition, local) for partition, local in rows]


def by_partition(positions: list[int]) -> dict[int, list[int]]:
    """Positions grouped by partition, each group in the order given."""
    groups: dict[int, list[int]] = {}
    for position in positions:
        groups.setdefault(partition_of(position), []).append(position)
    return groups


@pytest.fixture
def history(ledger: MemoryLedger, clock: Any, database_url: str, pg_schema: str) -> History:
    h = build(ledger, clock)
    insert_unknown_event(database_url, pg_schema, ledger.partition("alice"))
    ledger.create_memory(
        "carol", scope=Scope.global_(), memory_key="k", content="after", category="fact"
    )
    return h


def test_replay_is_complete_in_position_order_and_json_ready(
    ledger: MemoryLedger, history: History, database_url: str, pg_schema: str
) -> None:
    records = list(replay_events(ledger))
    positions = [r["position"] for r in records]
    # Each partition's events in its own order, gap-free; partitions merged by event time.
    assert by_partition(positions) == by_partition(stored_positions(database_url, pg_schema))
    assert len(set(positions)) == len(positions) == ledger.recorded()
    times = [r["occurred_at"] for r in records if r["occurred_at"]]
    assert [datetime.fromisoformat(t) for t in times] == sorted(map(datetime.fromisoformat, times))
    assert list(replay_events(ledger, batch=2)) == records
    text = json.dumps(records, ensure_ascii=False)  # raises on anything not JSON-ready
    assert REDACTED not in text  # the placeholder never poses as content
    names = "created updated version_restored confirmed suppressed restored deleted"
    expected = {f"memory.{n}" for n in names.split()} | {"memory.settings_changed", "unknown"}
    expected |= {f"memory.candidate_{n}" for n in ("created", "accepted", "rejected")}
    assert {r["event_type"] for r in records} == expected
    assert {r["aggregate"] for r in records} == {"memory", "candidate", "settings", "unknown"}
    first = records[0]
    keys = "position event_id event_type topic aggregate aggregate_id version user_id"
    keys += " scope_type workspace_type revision occurred_at request_id redacted data"
    assert list(first) == keys.split()
    assert first["aggregate_id"] == str(history.ids["m1"]) and first["version"] == 1
    assert datetime.fromisoformat(first["occurred_at"]).tzinfo is not None


def test_live_content_is_decrypted_and_shredded_content_is_redacted(
    ledger: MemoryLedger, history: History
) -> None:
    records = list(replay_events(ledger))
    by_id = {str(v): k for k, v in history.ids.items()}
    created = next(r for r in records if by_id.get(r["aggregate_id"]) == "m1")
    assert created["redacted"] is False and created["scope_type"] == "global"
    assert created["data"]["memory_key"] == "drink"
    assert created["data"]["content"] == "café au lait"
    assert created["data"]["content_hash"] and created["data"]["category"] == "preference"

    forgotten = [r for r in records if by_id.get(r["aggregate_id"]) == "m2"]
    assert [r["event_type"] for r in forgotten] == [
        "memory.created",
        "memory.suppressed",
        "memory.restored",
        "memory.deleted",
    ]
    assert forgotten[0]["redacted"] is True and forgotten[0]["workspace_type"] == "learning"
    assert "content" not in forgotten[0]["data"] and "memory_key" not in forgotten[0]["data"]
    assert forgotten[0]["data"]["category"] == "preference"  # clear fields stay
    tombstone = forgotten[-1]
    assert tombstone["redacted"] is False and tombstone["data"]["final_revision"] == 1

    proposal, rejection = (r for r in records if by_id.get(r["aggregate_id"]) == "c2")
    assert proposal["redacted"] is True and "proposed_content" not in proposal["data"]
    assert proposal["scope_type"] == "global" and proposal["user_id"] == "bob"
    assert rejection["event_type"] == "memory.candidate_rejected"
    accepted = [r for r in records if by_id.get(r["aggregate_id"]) == "c1"]
    assert accepted[0]["data"]["proposed_content"] == "pass the exam"
    assert accepted[1]["data"]["edited_content"] == "pass the exam in June"

    unknown = next(r for r in records if r["aggregate"] == "unknown")
    assert unknown["event_type"] == "unknown" and unknown["topic"] == "memledger:Future.Thing"
    assert unknown["data"] == {} and unknown["user_id"] is None and unknown["redacted"] is False


def test_filters_by_user_memory_position_and_time(ledger: MemoryLedger, history: History) -> None:
    records = list(replay_events(ledger))

    bob = list(replay_events(ledger, user_id="bob"))
    assert bob == [r for r in records if r["user_id"] == "bob"] and len(bob) == 3

    m3 = str(history.ids["m3"])
    about_m3 = list(replay_events(ledger, memory_id=history.ids["m3"]))
    assert [r["event_type"] for r in about_m3] == [
        "memory.created",
        "memory.candidate_accepted",  # resulting_memory_id = m3, saved in the same transaction
    ]
    assert all(m3 in (r["aggregate_id"], r["data"].get("resulting_memory_id")) for r in about_m3)

    # Positions order a partition's events: after/until narrow the replay to theirs.
    partition = ledger.partition("alice")
    alices = [r for r in records if partition_of(r["position"]) == partition]
    positions = [r["position"] for r in alices]
    middle = list(replay_events(ledger, after=positions[3], until=positions[9], batch=2))
    assert middle == alices[4:10]
    assert list(replay_events(ledger, after=positions[-1])) == []
    assert list(replay_events(ledger, after=5, until=5)) == []
    assert list(replay_events(ledger, user_id="bob", after=positions[0])) == (
        [] if ledger.partition("bob") != partition else bob
    )

    (t1, p1, _), (t2, p2, _) = history.moments[1], history.moments[2]
    window = list(replay_events(ledger, since=t1, before=t2))
    between = range(local_of(p1) + 1, local_of(p2) + 1)  # between the moments only alice wrote
    assert [r["position"] for r in window] == [pack(partition, n) for n in between]
    assert window == [
        r
        for r in records
        if r["occurred_at"] and t1 <= datetime.fromisoformat(r["occurred_at"]) < t2
    ]
    naive = list(replay_events(ledger, since=t1.replace(tzinfo=None), before=t2))
    assert naive == window  # a time without a zone is UTC
    next_one = pack(partition, local_of(p1) + 1)
    combined = list(replay_events(ledger, user_id="alice", since=t1, before=t2, after=next_one))
    assert combined == [r for r in window if r["user_id"] == "alice" and r["position"] > next_one]
    assert len(combined) == len(window) - 1


def test_filters_are_applied_before_anything_is_decrypted(
    ledger: MemoryLedger, history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched: list[UUID] = []
    refresh = ledger.keys.refresh

    def spy(key_ids: Any, destroyed: Any = ()) -> None:
        ids = list(key_ids)
        fetched.extend(ids)
        refresh(ids, destroyed)

    monkeypatch.setattr(ledger.keys, "refresh", spy)
    ledger.keys.forget_all_cached()
    assert len(list(replay_events(ledger, user_id="bob"))) == 3
    bobs = {history.ids["b1"], history.ids["c2"], user_key_id("bob")}
    assert fetched and set(fetched) <= bobs


def test_as_of_matches_what_the_ledger_said_at_each_moment(
    ledger: MemoryLedger, history: History
) -> None:
    forgotten = str(history.ids["m2"])
    redacted = {"memory_key": None, "content": None, "redacted": True}
    for at, _, memories in history.moments:
        expected = [m | redacted if m["memory_id"] == forgotten else m for m in memories]
        assert as_of(ledger, "alice", at) == expected, at
        assert as_of(ledger, "alice", at, batch=3) == expected
    before_anything = history.moments[0][0]
    assert as_of(ledger, "alice", before_anything) == []

    t1, t4, t5 = (history.moments[i][0] for i in (1, 4, 5))
    at_t1 = {m["memory_id"]: m for m in as_of(ledger, "alice", t1)}
    assert str(history.ids["m3"]) not in at_t1  # created later: absent
    assert at_t1[str(history.ids["m1"])]["content"] == "café au lait"
    assert at_t1[forgotten]["status"] == "active" and at_t1[forgotten]["revision"] == 1
    at_t4 = {m["memory_id"]: m for m in as_of(ledger, "alice", t4)}
    m1 = at_t4[str(history.ids["m1"])]
    assert (m1["content"], m1["category"], m1["revision"]) == ("green tea", "goal", 4)
    assert m1["last_confirmed_at"] is not None and m1["review_after"] is not None
    assert forgotten in at_t4 and at_t4[forgotten]["redacted"] is True
    at_t5 = as_of(ledger, "alice", t5)
    assert forgotten not in {m["memory_id"] for m in at_t5}  # forgotten by then: left out
    assert as_of(ledger, "alice", t5.replace(tzinfo=None)) == at_t5
    assert as_of(ledger, "nobody", t5) == []
    assert [m["memory_key"] for m in as_of(ledger, "bob", t5)] == ["drink"]


def test_as_of_replays_each_memory_only_up_to_its_first_later_event(
    ledger: MemoryLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer whose clock ran behind cannot splice its event into an earlier state."""
    created = ledger.create_memory(
        "alice", scope=GLOBAL, memory_key="k", content="first", category="fact"
    ).memory
    assert created is not None
    behind = created.created_at - timedelta(seconds=5)
    monkeypatch.setattr(Memory.Updated, "create_timestamp", staticmethod(lambda: behind))
    ledger.update_memory("alice", created.memory_id, expected_revision=1, content="second")
    assert as_of(ledger, "alice", behind) == []  # not created yet: its update does not count
    (now,) = as_of(ledger, "alice", datetime.now(UTC))
    assert (now["content"], now["revision"]) == ("second", 2)


def test_access_records_replay_as_access_and_follow_their_memory(ledger: MemoryLedger) -> None:
    memory = ledger.create_memory(
        "alice", scope=GLOBAL, memory_key="style", content="examples first", category="preference"
    ).memory
    other = ledger.create_memory(
        "alice", scope=GLOBAL, memory_key="lang", content="answer in Python", category="preference"
    ).memory
    hits = [AccessHit(m.memory_id, "global", None, m.revision) for m in (memory, other)]
    entries = result_entries(
        "read",
        user_id="alice",
        tool="api.list_memories",
        workspace=None,
        request_id="req-7",
        hits=hits,
        at=datetime.now(UTC),
    )
    ledger.record_access(entries)

    reads = [r for r in replay_events(ledger) if r["event_type"] == "memory.read"]
    assert [(r["aggregate"], r["request_id"], r["revision"]) for r in reads] == [
        ("access", "req-7", 1),
        ("access", "req-7", 1),
    ]
    assert [r["data"]["memory_id"] for r in reads] == [str(memory.memory_id), str(other.memory_id)]
    assert reads[0]["data"]["tool"] == "api.list_memories" and not reads[0]["redacted"]

    about = list(replay_events(ledger, memory_id=memory.memory_id))
    assert [r["event_type"] for r in about] == ["memory.created", "memory.read"]
