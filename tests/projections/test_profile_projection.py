"""The profile projection on PostgreSQL: fields with their sources, follows status, never blocks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import local_of
from domain.model.values import Scope
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.tracking import Tables
from projections.views.profile import Profile, ProfileField, profile_of
from projections.worker import ProjectionWorker

GLOBAL, LEARNING = Scope.global_(), Scope.workspace("learning")


class _AnyId:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, UUID)


ANY_ID: Any = _AnyId()


def remember(
    ledger: MemoryLedger,
    content: str,
    *,
    user: str = "alice",
    category: str = "preference",
    scope: Scope = GLOBAL,
    key: str | None = None,
) -> UUID:
    outcome = ledger.create_memory(
        user,
        scope=scope,
        memory_key=key or f"k{uuid.uuid4().hex[:8]}",
        content=content,
        category=category,
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def profile(
    worker: ProjectionWorker,
    user: str = "alice",
    scopes: Iterable[Scope] | None = None,
    now: datetime | None = None,
) -> dict[str, ProfileField]:
    worker.catch_up()
    with worker.pool.connection() as conn:
        partition = worker.ledger.partition(user)
        return profile_of(conn, worker.tables, user, scopes, partition=partition, now=now)


def rows(database_url: str, schema: str, logical: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        query = sql.SQL("TABLE {}").format(Tables(schema)[logical])
        return sorted(conn.execute(query).fetchall(), key=repr)


def test_the_profile_shows_each_field_with_the_memories_it_came_from(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    examples = remember(ledger, "我喜欢先看例子再理解定义")
    hours = remember(ledger, "工作日每天只能学习一小时", category="constraint", scope=LEARNING)
    remember(ledger, "I prefer green tea", category="preference")
    remember(ledger, "请用中文回答", category="fact")  # not a profile-like category
    remember(ledger, "Please reply in English", user="bob")
    assert profile(worker) == {
        "explanation_preference": ProfileField("example_first", [examples]),
        "daily_study_time": ProfileField("1h_weekdays", [hours]),
    }
    assert profile(worker, "bob") == {"response_language": ProfileField("en", [ANY_ID])}
    assert profile(worker, "carol") == {}


def test_only_visible_scopes_count(ledger: MemoryLedger, worker: ProjectionWorker) -> None:
    remember(ledger, "我喜欢先看例子再理解定义")
    remember(ledger, "工作日每天只能学习一小时", category="constraint", scope=LEARNING)
    assert set(profile(worker, scopes=[GLOBAL])) == {"explanation_preference"}
    assert set(profile(worker, scopes=[LEARNING])) == {"daily_study_time"}
    assert set(profile(worker, scopes=[GLOBAL, LEARNING])) == {
        "explanation_preference",
        "daily_study_time",
    }
    assert profile(worker, scopes=[Scope.workspace("research")]) == {}


def test_suppressing_hides_what_only_that_memory_produced_and_restoring_brings_it_back(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    examples = remember(ledger, "I prefer examples before definitions")
    before = profile(worker)
    ledger.suppress_memory("alice", examples)
    assert profile(worker) == {}
    ledger.restore_memory("alice", examples)
    assert profile(worker) == before


def test_forgetting_removes_the_field_and_every_trace_of_the_memory(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    examples = remember(ledger, "我喜欢先看例子再理解定义", key="how_i_learn")
    assert "explanation_preference" in profile(worker)
    ledger.forget_memory("alice", examples)
    assert profile(worker) == {}
    assert rows(database_url, pg_schema, "profile_sources") == []
    assert rows(database_url, pg_schema, "profile_memories") == []


def test_a_value_from_two_memories_survives_losing_one(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    first = remember(ledger, "请用中文回答")
    second = remember(ledger, "I like it when you answer in Chinese", scope=LEARNING)
    field = profile(worker)["response_language"]
    assert field.value == "zh" and set(field.memory_ids) == {first, second}
    ledger.suppress_memory("alice", first)
    assert profile(worker)["response_language"] == ProfileField("zh", [second])
    ledger.forget_memory("alice", second)
    assert profile(worker) == {}
    ledger.restore_memory("alice", first)
    assert profile(worker)["response_language"] == ProfileField("zh", [first])


def test_the_most_recently_asserted_source_gives_the_value(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    python = remember(ledger, "我习惯用 Python 写代码")
    rust = remember(ledger, "I prefer Rust", category="profile")
    assert profile(worker)["preferred_programming_language"] == ProfileField("rust", [rust])
    ledger.confirm_memory("alice", python)  # the user says the older one still holds
    assert profile(worker)["preferred_programming_language"] == ProfileField("python", [python])
    ledger.suppress_memory("alice", python)
    assert profile(worker)["preferred_programming_language"] == ProfileField("rust", [rust])


def test_changing_the_content_replaces_what_the_memory_produced(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    memory = remember(ledger, "我喜欢先看例子再理解定义")
    assert profile(worker)["explanation_preference"].value == "example_first"
    ledger.update_memory("alice", memory, expected_revision=1, content="先讲定义再举例")
    assert profile(worker)["explanation_preference"] == ProfileField("definition_first", [memory])
    ledger.update_memory("alice", memory, expected_revision=2, content="I like green tea")
    assert profile(worker) == {}


def test_a_change_while_suppressed_stays_hidden_until_restored(
    ledger: MemoryLedger, worker: ProjectionWorker
) -> None:
    memory = remember(ledger, "green tea", key="response_language", category="preference")
    ledger.suppress_memory("alice", memory)
    assert profile(worker) == {}
    # The key comes from an earlier batch: the exact-key rule still knows it.
    ledger.update_memory("alice", memory, expected_revision=1, content="English")
    assert profile(worker) == {}
    ledger.restore_memory("alice", memory)
    assert profile(worker) == {"response_language": ProfileField("en", [memory])}


def test_an_expired_memory_stops_counting(
    ledger: MemoryLedger, worker: ProjectionWorker, clock: Any
) -> None:
    outcome = ledger.create_memory(
        "alice",
        scope=GLOBAL,
        memory_key="answers",
        content="请用中文回答",
        category="preference",
        expires_at=clock.now + timedelta(days=1),
    )
    assert outcome.memory is not None
    assert set(profile(worker, now=clock.now)) == {"response_language"}
    later = clock.now + timedelta(days=2)
    assert profile(worker, now=later) == {}
    ledger.update_memory("alice", outcome.memory.memory_id, expected_revision=1, expires_at=None)
    assert set(profile(worker, now=later)) == {"response_language"}


def profile_scenario(ledger: MemoryLedger) -> None:
    """Creates, updates, confirmations, suppressions, restores and forgets across two users."""
    a = remember(ledger, "我喜欢先看例子再理解定义")
    b = remember(ledger, "请用中文回答", scope=LEARNING)
    c = remember(ledger, "中文", key="response_language", category="profile")
    d = remember(ledger, "工作日每天只能学习一小时", category="constraint")
    e = remember(ledger, "准备考研", category="goal", user="bob")
    ledger.suppress_memory("alice", b)
    ledger.update_memory("alice", b, expected_revision=1, content="Please reply in English")
    ledger.update_memory("alice", c, expected_revision=1, content="English")
    ledger.confirm_memory("alice", a)
    ledger.suppress_memory("alice", d)
    ledger.restore_memory("alice", d)
    ledger.forget_memory("alice", a)
    ledger.forget_memory("bob", e)
    remember(ledger, "I majored in physics", category="background", user="bob")


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_batches_of_any_size_give_the_same_rows_as_a_rebuild(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    pg_schema: str,
    batch_size: int,
) -> None:
    profile_scenario(ledger)
    worker = make_worker([Profile()], batch_size=batch_size)
    worker.catch_up()
    assert profile(worker)["response_language"] == ProfileField("en", [ANY_ID])
    for rebuild_batch in (1, 1000):
        report = rebuild(ledger, worker.pool, pg_schema, [Profile()], batch_size=rebuild_batch)
        assert report.identical, report.differences


def test_rebuilding_every_projection_gives_identical_tables(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    profile_scenario(ledger)
    worker.catch_up()
    before = rows(database_url, pg_schema, "profile_sources")
    assert before  # the scenario leaves some profile behind
    report = rebuild(ledger, worker.pool, pg_schema, all_projections())
    assert report.identical, report.differences
    assert rows(database_url, pg_schema, "profile_sources") == before


def test_a_failing_profile_never_blocks_the_other_projections_or_writes(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: Profile, cur: Any, t: Tables, batch: Any) -> None:
        # Cannot run at all (not one event's failure, which is quarantined: test_quarantine.py)
        raise psycopg.errors.UndefinedTable("profile table missing")

    monkeypatch.setattr(Profile, "apply", broken)
    failing = make_worker()
    remember(ledger, "我喜欢先看例子再理解定义")
    failing.catch_up()
    remember(ledger, "请用中文回答")  # writes go on while the profile is broken
    failing.catch_up()
    head = local_of(ledger.position("alice"))
    positions = {name: p for (name, _), p in failing.positions().items()}  # alice's partition
    assert positions.pop("profile", 0) == 0
    assert set(positions.values()) == {head}
    monkeypatch.undo()

    fixed = make_worker()  # once fixed (a restart), the profile catches up on its own
    assert set(profile(fixed)) == {"explanation_preference", "response_language"}
    assert {p for (_, _), p in fixed.positions().items()} == {head}


def changes(database_url: str, schema: str) -> list[tuple[Any, ...]]:
    """The audit rows of profile changes, in ledger order: (type, memory, revision)."""
    with psycopg.connect(database_url) as conn:
        query = sql.SQL(
            "SELECT event_type, memory_id, revision FROM {} ORDER BY position, seq"
        ).format(Tables(schema)["profile_changes"])
        return conn.execute(query).fetchall()


def test_each_change_to_what_a_memory_feeds_the_profile_is_audited(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    made, gone = "memory.projection_created", "memory.projection_removed"
    m = remember(ledger, "I prefer examples before definitions")
    remember(ledger, "I like green tea")  # feeds no field: no row
    ledger.suppress_memory("alice", m)
    ledger.restore_memory("alice", m)
    ledger.confirm_memory("alice", m)  # re-asserts, changes nothing
    ledger.update_memory("alice", m, expected_revision=1, content="Please reply in English")
    ledger.update_memory("alice", m, expected_revision=2, category="goal")  # no profile category
    worker.catch_up()
    assert changes(database_url, pg_schema) == [
        (made, m, 1),
        (gone, m, 1),  # suppressed
        (made, m, 1),  # restored
        (gone, m, 2),  # explanation_preference no longer stated ...
        (made, m, 2),  # ... response_language now is (fields in name order)
        (gone, m, 3),
    ]

    ledger.update_memory("alice", m, expected_revision=3, category="preference")
    worker.catch_up()
    assert changes(database_url, pg_schema)[-1] == (made, m, 4)

    ledger.forget_memory("alice", m)
    worker.catch_up()
    assert changes(database_url, pg_schema) == []  # derived from shredded content: gone too
    assert profile(worker) == {}


def test_profile_changes_are_the_same_live_and_rebuilt_across_a_forget(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    kept = remember(ledger, "I prefer examples before definitions")
    lost = remember(ledger, "请用中文回答", scope=LEARNING)
    worker.catch_up()  # the live run sees lost's content before it is shredded
    ledger.suppress_memory("alice", kept)
    ledger.forget_memory("alice", lost)
    worker.catch_up()
    live = changes(database_url, pg_schema)
    assert [row[1] for row in live] == [kept, kept]
    report = rebuild(ledger, worker.pool, pg_schema, [Profile()])
    assert report.identical, report.differences
    assert changes(database_url, pg_schema) == live
