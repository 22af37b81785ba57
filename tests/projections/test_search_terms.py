"""The search_terms projection: the ranker's terms per live memory, and the narrow search fetch."""

from __future__ import annotations

import psycopg
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from domain.policy import visible_scopes
from projections.reads import Reads
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.tokens import index_terms
from projections.tracking import Tables
from projections.views.search_terms import stored_terms
from projections.worker import ProjectionWorker
from retrieval.fetch import fetch_rows
from retrieval.query import Query, SearchRow
from retrieval.search import search

LEARNING = Scope.workspace("learning")


def terms_of(database_url: str, schema: str) -> dict[object, list[str]]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT memory_id, terms FROM {}").format(Tables(schema)["search_terms"])
        ).fetchall()
    return {memory_id: terms for memory_id, terms in rows}


def test_terms_follow_the_ledger_vanish_on_forget_and_rebuild_identically(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    tea = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="drink", content="Green tea", category="fact"
    ).memory.memory_id
    goal = ledger.create_memory(
        "alice", scope=LEARNING, memory_key="exam_goal", content="通过考试", category="goal"
    ).memory.memory_id
    worker.catch_up()
    rows = terms_of(database_url, pg_schema)
    seal = Tables(pg_schema).seal  # terms are stored as the user's keyed hashes, never words
    hashed = seal.hasher("alice", "term")
    assert rows[tea] == sorted(hashed(index_terms("drink", "Green tea")))
    assert rows[goal] == sorted(hashed(index_terms("exam_goal", "通过考试")))
    assert rows[tea] == stored_terms(seal, "alice", "drink", "Green tea")

    ledger.update_memory("alice", tea, expected_revision=1, content="black coffee")
    ledger.suppress_memory("alice", goal)
    ledger.restore_memory("alice", goal)
    worker.catch_up()
    assert terms_of(database_url, pg_schema)[tea] == sorted(
        hashed(index_terms("drink", "black coffee"))
    )

    ledger.forget_memory("alice", tea)
    worker.catch_up()
    rows = terms_of(database_url, pg_schema)
    assert tea not in rows and goal in rows

    for batch_size in (1, 7):
        report = rebuild(ledger, worker.pool, pg_schema, all_projections(), batch_size=batch_size)
        assert report.identical, report.differences


def test_the_narrow_fetch_ranks_as_the_full_pool_does(
    ledger: MemoryLedger, worker: ProjectionWorker, pg_schema: str
) -> None:
    for i in range(30):
        ledger.create_memory(
            "alice",
            scope=LEARNING if i % 3 else Scope.global_(),
            memory_key=f"k{i}" if i % 3 else (f"k{i + 1}" if i % 6 else f"g{i}"),
            content=f"note {i}: {'tea' if i % 2 else 'coffee'} with {'milk' if i % 5 else 'sugar'}",
            category="preference" if i % 4 else "fact",
        )
    worker.catch_up()
    reads = Reads(worker.pool, pg_schema, worker.ledger.partition)
    now = ledger.clock()
    scopes = visible_scopes("learning")
    everything = [
        SearchRow.of(r) for r in reads.retrievable_memories("alice", scopes, now=now, limit=10_000)
    ]
    for query in (
        "tea",
        "tea with milk",
        "k4",
        "k3",
        "g6",
        "my preferences",
        "coffee sugar",
        "nothing",
    ):
        for category, limit in ((None, 5), (None, 1), ("fact", 3)):
            narrow = [
                SearchRow.from_row(r)
                for r in fetch_rows(
                    reads,
                    "alice",
                    scopes,
                    Query.of(query),
                    now=now,
                    category=category,
                    limit=limit,
                )
            ]
            assert all(c.terms is not None for c in narrow)
            want = search(
                everything, query, workspace="learning", now=now, category=category, limit=limit
            )
            got = search(
                narrow, query, workspace="learning", now=now, category=category, limit=limit
            )
            assert [i.row.memory_id for i in got.items] == [i.row.memory_id for i in want.items], (
                query,
                category,
                limit,
            )
