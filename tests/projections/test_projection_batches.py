"""Projections applied in batches of any size give the same tables as one event at a time.

The projections fold a batch in memory (rows created, changed and deleted within it) and
write it with a few statements, so every in-batch interaction is exercised here: memories
created, changed, suppressed and forgotten in the same batch, candidates proposed, accepted
and shredded around the forgetting of their memories, profile sources derived and replaced.
"""

# The Chinese content has full-width punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope, normalise_content
from projections.envelope import Envelope, decode_batch
from projections.rebuild import _replay, rebuild
from projections.rebuild.reading import heads, spans
from projections.registry import all_projections
from projections.tracking import Tables
from projections.views import profile_rules
from projections.views.profile_rules import MemoryFacts, Rule, derive
from projections.worker import ProjectionWorker

GLOBAL, LEARNING = Scope.global_(), Scope.workspace("learning")


def memory(ledger: MemoryLedger, user: str, key: str, content: str, **options: Any) -> UUID:
    outcome = ledger.create_memory(
        user,
        scope=options.pop("scope", GLOBAL),
        memory_key=key,
        content=content,
        category=options.pop("category", "preference"),
        **options,
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def candidate(ledger: MemoryLedger, user: str, key: str, content: str, **options: Any) -> UUID:
    outcome = ledger.propose_candidate(
        user,
        operation=options.pop("operation", "create"),
        scope=options.pop("scope", LEARNING),
        memory_key=key,
        content=content,
        category=options.pop("category", "preference"),
        **options,
    )
    assert outcome.candidate is not None
    return outcome.candidate.candidate_id


def busy_ledger(ledger: MemoryLedger, clock: Any) -> None:
    """Every kind of event, often several about one aggregate in a row."""
    a = memory(ledger, "alice", "style", "我喜欢先看例子再理解定义")
    b = memory(ledger, "alice", "reply", "请用中文回答", scope=LEARNING)
    c = memory(ledger, "alice", "response_language", "中文", category="profile")
    d = memory(ledger, "alice", "study", "工作日每天只能学习一小时", category="constraint")
    e = memory(ledger, "bob", "exam", "准备考研", category="goal")
    f = memory(
        ledger,
        "bob",
        "lang",
        "I usually write Go language services, reply in English",
        expires_at=clock.now + timedelta(days=3),
    )
    ledger.suppress_memory("alice", b)
    ledger.update_memory("alice", b, expected_revision=1, content="Please reply in English")
    ledger.update_memory("alice", c, expected_revision=1, content="English")
    ledger.update_memory("alice", c, expected_revision=2, content="中文", category="profile")
    ledger.restore_version("alice", c, revision=1, expected_revision=3)
    ledger.confirm_memory("alice", a)
    ledger.suppress_memory("alice", d)
    ledger.restore_memory("alice", d)
    ledger.update_memory("bob", f, expected_revision=1, expires_at=None)
    ledger.put_global_memory(
        "bob", memory_key="lang", content="我习惯用 Python 写代码", category="preference"
    )
    # Candidates: accepted into a new memory that is then forgotten, pending ones about a
    # memory that is forgotten (expired with it), rejected, expired, and one accepted as a change.
    accepted = candidate(ledger, "alice", "goal", "pass the exam in June")
    outcome = ledger.accept_candidate("alice", accepted, content="pass the exam in July")
    assert outcome.memory is not None
    replace = candidate(
        ledger,
        "alice",
        "style",
        "先讲定义,再举例子",
        operation="replace",
        target_memory_id=a,
        scope=GLOBAL,
    )
    change = candidate(
        ledger,
        "bob",
        "exam",
        "准备雅思",
        operation="replace",
        target_memory_id=e,
        scope=GLOBAL,
        category="goal",
    )
    ledger.accept_candidate("bob", change)
    rejected = candidate(ledger, "bob", "diet", "vegan", category="fact")
    ledger.reject_candidate("bob", rejected)
    expiring = candidate(ledger, "bob", "later", "maybe later")
    ledger.forget_memory("alice", outcome.memory.memory_id)  # the accepted candidate's result
    ledger.forget_memory("alice", a)  # expires and shreds the pending replace candidate
    assert ledger.get_candidate("alice", replace).status == "expired"
    ledger.forget_memory("bob", e)
    clock.advance(days=31)
    ledger.expire_candidate(expiring)
    ledger.change_settings("bob", auto_extract_enabled=False)
    # More users, and one erased whole (many forgets and expiries in one transaction).
    for i in range(6):
        user = f"user{i}"
        ids = [
            memory(ledger, user, f"k{j}", f"I prefer examples first, note {i}-{j}")
            for j in range(3)
        ]
        ledger.update_memory(user, ids[0], expected_revision=1, content=f"less math please {i}")
        candidate(ledger, user, "proposal", f"工作日每天学习两小时 {i}", category="constraint")
        if i % 2:
            ledger.forget_memory(user, ids[1])
    ledger.erase_user("user3")
    memory(ledger, "alice", "after", "reply in English, examples before definitions")


class Decoding:
    """A ledger whose every command's events are decoded at once, before any later shredding.

    Replaying the ledger later reads a forgotten memory's events (and those of candidates
    about it) already redacted; the live worker may have read them in clear, in the same
    batch as the Forgotten. These envelopes are what it read.
    """

    def __init__(self, ledger: MemoryLedger) -> None:
        self.ledger = ledger
        self.envelopes: list[Envelope] = []
        self.seen: dict[int, int] = {}  # partition -> last position decoded

    def __getattr__(self, name: str) -> Any:
        command = getattr(self.ledger, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            result = command(*args, **kwargs)
            for partition, head in self.ledger.heads().items():
                if head > self.seen.get(partition, 0):
                    notes = self.ledger.store.recorder().read_partition(
                        partition, self.seen.get(partition, 0), 10_000
                    )
                    self.envelopes += decode_batch(self.ledger.mapper, notes)
                    self.seen[partition] = head
            return result

        return run


def fill(
    database_url: str, schema: str, envelopes: list[Envelope], batch_size: int
) -> dict[str, list[tuple[Any, ...]]]:
    """Apply the envelopes to a fresh set of tables in batches of `batch_size`."""
    projections = all_projections()
    t = Tables(schema, f"__b{secrets.token_hex(4)}")
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.transaction():
            for projection in projections:
                for statement in projection.create(t):
                    conn.execute(statement)
        partitions: dict[int, list[Envelope]] = {}
        for envelope in envelopes:  # batches of one partition, as the worker reads them
            partitions.setdefault(envelope.partition, []).append(envelope)
        for mine in partitions.values():
            for start in range(0, len(mine), batch_size):
                with conn.transaction(), conn.cursor() as cur:
                    for projection in projections:
                        projection.apply(cur, t, mine[start : start + batch_size])
        return snapshot(conn, t)


def snapshot(conn: psycopg.Connection[Any], t: Tables) -> dict[str, list[tuple[Any, ...]]]:
    names = [name for projection in all_projections() for name in projection.tables]
    return {
        name: sorted(conn.execute(sql.SQL("TABLE {}").format(t[name])).fetchall(), key=repr)
        for name in names
    }


def test_batches_of_any_size_give_the_same_tables(
    ledger: MemoryLedger, database_url: str, pg_schema: str, clock: Any
) -> None:
    decoding = Decoding(ledger)
    busy_ledger(decoding, clock)  # type: ignore[arg-type]
    envelopes = decoding.envelopes
    assert len(envelopes) == ledger.recorded()
    for partition, head in ledger.heads().items():  # each partition whole, in order
        assert [e.local for e in envelopes if e.partition == partition] == list(range(1, head + 1))
    one, seven, many = (fill(database_url, pg_schema, envelopes, n) for n in (1, 7, 2000))
    assert one == seven
    assert one == many
    filled = ("active_memories", "memory_versions", "audit_log", "tombstones", "candidates")
    filled += ("user_revisions", "profile_sources", "profile_memories")
    assert all(one[name] for name in filled), [name for name in filled if not one[name]]
    shredded = [row for row in one["candidates"] if row[7] == b""]  # sealed REDACTED
    assert len(shredded) >= 3  # rejected, expired, and about forgotten memories


def test_replays_in_batches_of_any_size_and_the_live_worker_agree(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
    clock: Any,
) -> None:
    busy_ledger(ledger, clock)
    head = heads(ledger)
    tables = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for batch_size in (1, 7, 2000):
            t = Tables(pg_schema, f"__b{secrets.token_hex(4)}")
            with conn.transaction():
                for projection in all_projections():
                    for statement in projection.create(t):
                        conn.execute(statement)
            replayed = _replay(ledger, conn, all_projections(), t, spans(head), batch_size)
            assert replayed == ledger.recorded()
            tables.append(snapshot(conn, t))
        # The live worker, one transaction per batch, lands on the same rows.
        make_worker(batch_size=3).catch_up()
        tables.append(snapshot(conn, Tables(pg_schema)))
    assert all(t == tables[0] for t in tables[1:])
    report = rebuild(ledger, make_worker().pool, pg_schema, all_projections(), batch_size=5)
    assert report.identical, report.differences


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_the_ascii_shortcut_normalises_as_the_domain_does(text: str) -> None:
    assert profile_rules._normalised(text) == normalise_content(text)


_FRAGMENTS = (
    "I prefer", "examples", "definitions", "first", "before", "先看例子", "再理解定义", "python",
    "c++", "c", "r", "go", "language", "用", "写代码", "reply in", "english", "中文", "回答",
    "apa", "cite", "style", "less", "math", "不要", "公式", "严格的数学推导", "study",
    "1 hour", "每天", "学习", "一小时", "weekdays", "major", "计算机科学", "专业", "i am",
    "beginner", "零基础", "准备", "考研", "ielts", "not", "不", "but", ",", ".", ";", " ",
    "但是", "Ｐｙｔｈｏｎ", "。", "，",
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_FRAGMENTS), max_size=12),
    st.sampled_from(["preference", "constraint", "goal", "background", "fact"]),
    st.sampled_from(["note", "response_language", "major", "daily_study_time"]),
)
def test_rule_prefilters_never_change_what_is_derived(
    parts: list[str], category: str, key: str
) -> None:
    """Skipping a rule whose needles are absent (or whose fields are not allowed) is exact."""
    memory = MemoryFacts(key, "".join(parts), category)
    plain = tuple(Rule(rule.name, rule.apply) for rule in profile_rules.RULES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profile_rules, "RULES", plain)
        expected = derive(memory)
    assert derive(memory) == expected
