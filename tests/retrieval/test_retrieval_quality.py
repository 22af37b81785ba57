"""Retrieval quality of `search_core_memories` on a labelled set, against real PostgreSQL.

The set (this folder)
---------------------
`memories.jsonl`, one memory a line: `label` (stable name, e.g. `zw.exam_goal.learning`),
`user`, `scope` (`global`, `learning`, `teaching` or `research`), `memory_key`, `category`,
`content`, `age_days` (how long ago it was written), and optionally `source_type`
(`confirmed`), `status` (`suppressed` or `forgotten`), `expires_in_days` (negative: already
expired) and `review_in_days` (negative: due for review). 24 users (students, teachers,
researchers; Chinese, English and mixed writers), all eight categories, both scope levels, the
same key in global and a workspace, the same key for several users, and look-alike content
across users, so that a scope leak would show.

`queries.jsonl`, one query a line: `id`, `kind`, `user`, `workspace` (the token's), `query`,
optionally `category` (the tool's option), `expected` (labels, most relevant first; empty when
nothing should come back), optionally `forbidden` (labels that must never come back; checked to
be invisible to the query) and `note`. Kinds: `exact_key`, `phrase_zh` / `phrase_en`,
`keyword_zh` / `keyword_en`, `mixed` (Chinese with Latin terms), `question_zh` /
`question_en` (an agent's natural wording), `normalisation` (case, full width, punctuation),
`category`, `review` (an equal match due for review ranks lower), `shadow` (the workspace memory
hides the global one with the same key), `scope_trap` (another user's or another workspace's
memory matches), `status` (only a suppressed, forgotten or expired memory matches), `no_match`
(no visible memory shares a word), `paraphrase` (the same language, other words: "what do I do
for a living") and `cross_language` (English for a Chinese memory or Chinese for an English one).
The last two are what lexical search cannot answer and the hybrid ranker (retrieval/hybrid.py)
is for; they are left out of the `guarded` summary (comparable with the lexical baseline) and
counted in `all`.
Relevance is labelled as a reader would judge it, not as the ranker happens to order. The
misses the baseline records (listed by `scripts/eval_retrieval.py`) are lexical limits: a
Chinese question sharing only a generic word with several memories (专业, 数据: the newest wins
the tie), one whose shared bigram holds a function character (我带几个班), an acronym that is
an English stop word (DID), a long memory matching one word of a query (lab).

What this test checks
---------------------
evaluation/labelled/run.py's `evaluate` loads the set with the ledger's commands (the test's
settable clock steps through the ages; the worker runs the embeddings projection with the
bundled model) and sends every query to the HTTP tool endpoint, once with lexical search and
once with hybrid search. Hard,
whatever the baseline: no scope leak in any query (both rankers); for lexical search, every
`no_match` query returns nothing and every `review` query comes back in its expected order
(hybrid search ranks every dense candidate above the threshold by relevance: issue 23); and
the hybrid never scores below lexical over all answerable queries. Guarded: recall@5, MRR
and empty-result precision, overall, per kind and on each half (tuning, held-out), per
ranker, must not fall below `baseline.json`; and the hybrid must meet issue 7's targets over
all answerable queries (recall@5 >= 0.95, MRR >= 0.90).

Updating the baseline
---------------------
After a deliberate change to the ranking or to the set, run

    .venv/bin/python scripts/eval_retrieval.py --write-baseline

(it refuses while there are hard failures), look at the per-kind table and the listed misses,
and commit `baseline.json` with the change. Lowering a value needs a reason in the commit
message; adding queries usually changes the values, so record them in the same commit.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.metrics import Metrics
from api.services import Services
from domain.ledger.ledger import MemoryLedger
from domain.model.values import CATEGORIES, WORKSPACES
from evaluation.labelled import cases, run, scores
from evaluation.labelled.render import render
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from retrieval.vectors.service import EmbeddingService

pytestmark = pytest.mark.integration

HERE = pathlib.Path(__file__).resolve().parent


def test_the_set_is_consistent_and_large_enough() -> None:
    data = cases.EvalSet.load(HERE)
    answerable = [q for q in data.queries if q.expected and q.guarded]

    assert cases.check_set(data) == []
    assert len(data.memories) >= 200
    assert len({m.user for m in data.memories}) >= 20
    assert len(data.queries) >= 100 and len(answerable) >= 100
    assert {m.category for m in data.memories} == set(CATEGORIES)
    assert {m.scope for m in data.memories} == {"global", *WORKSPACES}
    assert {m.status for m in data.memories} == set(cases.STATUSES)
    assert any(m.expires_in_days is not None and m.expires_in_days < 0 for m in data.memories)
    assert any(m.review_in_days is not None and m.review_in_days < 0 for m in data.memories)
    assert {q.kind for q in data.queries} == set(cases.KINDS)
    assert sum(q.kind == "paraphrase" for q in data.queries) >= 60
    assert sum(q.kind == "cross_language" for q in data.queries) >= 60
    unrelated = [q.query for q in data.queries if q.kind == "no_match"]
    assert len(unrelated) >= 60
    english = sum(q.isascii() for q in unrelated)
    assert english >= 25 and len(unrelated) - english >= 25


def test_the_halves_are_stable_and_balanced() -> None:
    data = cases.EvalSet.load(HERE)
    halves = [scores.half(q.id) for q in data.queries]

    assert scores.half("q001") == scores.half("q001") and set(halves) == set(scores.HALVES)
    assert abs(halves.count("tuning") - halves.count("held-out")) <= len(halves) // 10


def test_the_scoring_gives_a_perfect_ranking_one_and_catches_every_forbidden_memory() -> None:
    data = cases.EvalSet.load(HERE)
    perfect = [
        scores.Outcome(q, q.expected, cases.leaks_of(q, q.expected, data)) for q in data.queries
    ]
    report = scores.summarise(data, perfect, "oracle")

    assert report["guarded"]["recall@5"] == report["guarded"]["mrr"] == 1.0
    assert report["guarded"]["empty_precision"] == 1.0
    assert scores.hard_failures(report) == [] and report["failures"] == []
    for q in data.queries:
        assert cases.leaks_of(q, q.forbidden, data) == q.forbidden
        other = scores.Outcome(q, (*q.forbidden, *q.expected), cases.leaks_of(q, q.forbidden, data))
        assert other.perfect == (not q.forbidden)


@pytest.mark.slow  # ~25 s
def test_retrieval_quality_holds_and_nothing_leaks(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    embedding_service: EmbeddingService,
    pg_schema: str,
    clock: Any,
) -> None:
    worker = make_worker(all_projections(embedding_service))
    worker.start()
    services = Services(
        ledger=ledger,
        reads=Reads(worker.pool, pg_schema, worker.ledger.partition),
        metrics=Metrics(),
        jwt_secret="test-secret-of-at-least-32-bytes-long!",
        worker=worker,
    )
    with TestClient(create_app(services)) as client:
        reports = run.evaluate(
            ledger, clock, worker, client, services, cases.EvalSet.load(HERE), embedding_service
        )
    baseline = json.loads((HERE / "baseline.json").read_text(encoding="utf-8"))
    misses = "\n" + "\n\n".join(render(r) for r in reports.values())

    assert set(reports) == {"lexical", "hybrid"}
    for name, report in reports.items():
        assert report["hard"]["leaks"] == [], misses
        if name == "lexical":  # hybrid ranks its dense candidates by relevance (issue 23)
            assert report["hard"]["no_match_not_empty"] == [], misses
            assert report["hard"]["order"] == [], misses
        assert scores.regressions(report, baseline[name]) == [], misses
    assert scores.below_lexical(reports) == [], misses
    assert scores.missed_targets(reports) == [], misses  # issue 7: R@5 >= 0.95, MRR >= 0.90
