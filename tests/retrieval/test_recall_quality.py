"""The issue-15 recall set through the product, against real PostgreSQL (evaluation/).

The tuning and validation splits' memories are written over HTTP into a throwaway schema, the
embeddings worker catches up, and every query goes to the search tool (and to the owner's
search, `GET /me/core-memories?q=`, over the same scopes: its figures must be the tool's); the
plain dense and BM25 baselines run on the same memories. The guard (evaluation/guard.py) holds
the hybrid's figures, overall and per kind, at or above tests/retrieval/recall_set/baseline.json,
requires the baselines to reproduce, and fails when a target of issue 23 that was met is
missed. The test split is never loaded here: it is for the final report only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import evaluation.recall_set as ev
from evaluation import guard
from evaluation.product import EMBEDDER, running_product
from evaluation.report import render
from evaluation.scoring import evaluate

BASELINE = ev.SET_DIR / "baseline.json"
OWNER_TOLERANCE = 0.005
"""The owner's search over an agent's view may differ from the agent's in a float tie only
(the owner's candidates are every row, the agent's the fetch's exact few plus a dense pool)."""


def _baseline() -> dict[str, Any]:
    return dict(json.loads(BASELINE.read_text(encoding="utf-8")))


def test_the_set_is_broad_and_its_guarded_splits_leave_the_test_split_out() -> None:
    everything = ev.RecallSet.load(ev.SET_DIR, ev.SPLITS)
    guarded = ev.RecallSet.load(ev.SET_DIR, guard.GUARDED_SPLITS)
    unrelated = [q for q in everything.queries if not q["expected"]]

    assert len(everything.memories) >= 1500 and len(everything.queries) >= 600
    assert len(unrelated) >= 0.2 * len(everything.queries)
    assert {q["kind"] for q in everything.queries} == {*ev.KINDS, "unrelated"}
    assert {q["lang"] for q in everything.queries} == set(ev.LANGS)
    assert {q["split"] for q in guarded.queries} == set(guard.GUARDED_SPLITS)
    test_users = {q["user"] for q in everything.queries if q["split"] == "test"}
    assert test_users and not test_users & {m["user"] for m in guarded.memories.values()}


def test_the_guard_catches_a_fall_a_moved_yardstick_and_a_newly_missed_target() -> None:
    baseline = _baseline()
    result = {
        "all": {"recall@5": 1.0, "mrr": 1.0, "unrelated_empty": 1.0},
        "per_kind": {k: {"recall@5": 1.0, "mrr": 1.0} for k in ev.KINDS},
    }
    report: dict[str, Any] = {"set": baseline["set"], "splits": {}}
    for split in guard.GUARDED_SPLITS:
        report["splits"][split] = {"hybrid": json.loads(json.dumps(result))}
        for name in guard.YARDSTICKS:
            recorded = baseline["splits"][split][name]
            report["splits"][split][name] = {
                "all": {m: recorded[m] for m in ("recall@5", "mrr", "unrelated_empty")},
                "per_kind": {
                    k: {m: recorded[f"{k}.{m}"] for m in ("recall@5", "mrr")} for k in ev.KINDS
                },
            }
    assert guard.missed(report) == []
    assert guard.regressions(report, {**baseline, "missed_targets": []}) == []

    report["splits"]["tuning"]["hybrid"]["all"]["recall@5"] = 0.97
    report["splits"]["validation"]["bm25"]["all"]["mrr"] += 0.1
    found = guard.regressions(report, {**baseline, "missed_targets": []})

    assert {"tuning: recall@5", "tuning: recall@5 below dense"} <= set(guard.missed(report))
    assert any(f.startswith("tuning hybrid recall@5: 0.97 <") for f in found)
    assert any(f.startswith("validation bm25 mrr") for f in found)
    assert "target newly missed: tuning: recall@5" in found
    assert guard.regressions(report, {**baseline, "missed_targets": ["tuning: recall@5"]})


@pytest.mark.slow  # ~50 s: embeds the recall set's memories and queries once
@pytest.mark.integration
def test_recall_holds_its_recorded_figures(database_url: str) -> None:
    baseline = _baseline()
    data = ev.RecallSet.load(ev.SET_DIR, guard.GUARDED_SPLITS)
    with running_product(database_url) as product:
        report = evaluate(
            product, data, list(guard.GUARDED_SPLITS), owner=True, timed_baselines=False
        )
    shown = "\n" + render(report, list(guard.GUARDED_SPLITS))

    assert baseline["embedder"] == EMBEDDER
    for split in guard.GUARDED_SPLITS:  # the yardsticks behave as the issue describes them
        dense = report["splits"][split]["dense"]["all"]
        assert dense["unrelated_empty"] == 0.0 and dense["recall@5"] >= 0.95, shown
    assert guard.regressions(report, baseline) == [], shown
    for split in guard.GUARDED_SPLITS:  # the owner's search ranks as the agent's does
        hybrid = guard.figures(report["splits"][split]["hybrid"])
        owner = guard.figures(report["splits"][split]["owner"])
        assert owner == pytest.approx(hybrid, abs=OWNER_TOLERANCE), shown
