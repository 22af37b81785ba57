"""The staged candidate fetch (retrieval/fetch.py) answers as ranking every memory does.

Memories are made to stress each stage: phrase stand-ins that are not phrases (more of them
than the first fetch asks for), rows holding all terms but not the phrase's stop words, term
subsets below the top level, categories alone (due for review or not, one or two named),
global memories hidden by workspace ones, keys, and weak CJK terms.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from domain.policy import visible_scopes
from projections.reads import Reads
from projections.worker import ProjectionWorker
from retrieval.fetch import SLACK, fetch_rows, levels
from retrieval.query import Query, SearchRow
from retrieval.search import search

LEARNING = Scope.workspace("learning")
TEACHING = Scope.workspace("teaching")

QUERIES = (
    "my goals",
    "goal",
    "plan goal exam",
    "tea with milk",
    "milk tea",
    "my preferences and goals",
    "我的目标",
    "学习计划",
    "habit_7",
    "habit 7",
    "background",
    "trust",
    "rust",
    "nothing at all",
    "about it",  # stop words only: no terms, but a key
)


def _memories(ledger: MemoryLedger, clock: Any) -> None:
    soon = clock.now + timedelta(hours=1)
    for i in range(60):
        scope = (LEARNING, Scope.global_(), TEACHING)[i % 3]
        content = (
            f"my notes {i} say the goal is {'tea with milk' if i % 4 else 'milk then tea'}",
            f"goal {i}: my plan for the exam",
            f"学习计划{i}:我的目标是考试" if i % 5 else f"我的{i}个目标",
            f"I {'trust' if i % 2 else 'use rust'} entry {i}",
        )[i % 4]
        ledger.create_memory(
            "alice",
            scope=scope,
            memory_key=f"habit_{i // 3}" if i % 7 else f"goal_plan_{i}",
            content=content,
            category=("goal", "preference", "background", "fact")[i % 4],
            review_after=soon if i % 6 == 0 else None,
        )
    for scope in (Scope.global_(), LEARNING):
        ledger.create_memory(
            "alice", scope=scope, memory_key="about_it", content="Stop words", category="other"
        )
    ledger.create_memory(
        "bob", scope=Scope.global_(), memory_key="goal", content="my goals", category="goal"
    )


@pytest.fixture
def reads(ledger: MemoryLedger, worker: ProjectionWorker, pg_schema: str, clock: Any) -> Reads:
    _memories(ledger, clock)
    worker.catch_up()
    clock.advance(hours=2)  # some memories are now due for review
    return Reads(worker.pool, pg_schema, worker.ledger.partition)


@pytest.mark.parametrize("workspace", ["learning", "research"])
def test_the_staged_fetch_answers_as_the_full_pool(
    reads: Reads, clock: Any, workspace: str
) -> None:
    now = clock.now
    scopes = visible_scopes(workspace)
    everything = [
        SearchRow.of(r) for r in reads.retrievable_memories("alice", scopes, now=now, limit=10_000)
    ]
    for query in QUERIES:
        for category, limit in ((None, 1), (None, 5), (None, 20), ("goal", 3), ("fact", 5)):
            rows = fetch_rows(
                reads, "alice", scopes, Query.of(query), now=now, category=category, limit=limit
            )
            assert all(r["user_id"] == "alice" for r in rows)
            got = search(
                [SearchRow.from_row(r) for r in rows],
                query,
                workspace=workspace,
                now=now,
                category=category,
                limit=limit,
            )
            want = search(
                everything, query, workspace=workspace, now=now, category=category, limit=limit
            )
            assert [i.row.memory_id for i in got.items] == [i.row.memory_id for i in want.items], (
                query,
                category,
                limit,
            )


def test_the_fetch_stays_narrow_for_common_terms(reads: Reads, clock: Any) -> None:
    scopes = visible_scopes("learning")
    rows = fetch_rows(reads, "alice", scopes, Query.of("goal"), now=clock.now, limit=5)
    assert len(rows) <= 5 + SLACK  # not the 20-odd visible memories holding "goal"


def test_no_match_fetches_nothing(reads: Reads, clock: Any) -> None:
    scopes = visible_scopes("learning")
    assert fetch_rows(reads, "alice", scopes, Query.of("kubernetes"), now=clock.now) == []
    assert fetch_rows(reads, "alice", [], Query.of("goal"), now=clock.now) == []


def test_levels_are_the_minimal_term_subsets_of_each_weight() -> None:
    assert levels([2, 2, 2]) == [(4, [(0, 1), (0, 2), (1, 2)])]
    assert levels([2, 2]) == []  # below the total only single terms: the `&&` level
    assert levels([1, 2, 2]) == [(4, [(1, 2)]), (3, [(0, 1), (0, 2), (1, 2)])]
    assert levels([2] * 7) == []  # long queries go straight to `&&`
