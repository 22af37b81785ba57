"""The suite's guard over the recall evaluation: recorded figures that may not fall.

tests/retrieval/recall_set/baseline.json holds, per evaluated split (tuning and validation,
never test), the hybrid's recall@5 / MRR / unrelated-empty overall and recall@5 / MRR per
kind, the two in-process baselines' figures (plain dense top-5 and BM25: the yardsticks, which
must reproduce), and which of issue 23's targets the hybrid misses. The guard
(tests/retrieval/test_recall_quality.py) fails when a hybrid figure falls below its record,
when a yardstick moved (the set or the embedder changed: record again), or when a target that
was met is missed. Record after a deliberate change:

    .venv/bin/python scripts/eval_recall.py --write-baseline
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from evaluation.recall_set import KINDS
from evaluation.scoring import target_misses

__all__ = [
    "GUARDED_SPLITS",
    "YARDSTICKS",
    "YARDSTICK_TOLERANCE",
    "baseline_of",
    "figures",
    "missed",
    "regressions",
]

GUARDED_SPLITS: Final = ("tuning", "validation")
YARDSTICKS: Final = ("dense", "bm25")
YARDSTICK_TOLERANCE: Final = 0.005
"""The baselines are deterministic; this absorbs a float tie broken otherwise, nothing more."""


def figures(result: Mapping[str, Any]) -> dict[str, float | None]:
    """One ranker's guarded figures on one split: overall, then per kind."""
    out: dict[str, float | None] = {
        metric: result["all"][metric] for metric in ("recall@5", "mrr", "unrelated_empty")
    }
    for kind in KINDS:
        for metric in ("recall@5", "mrr"):
            out[f"{kind}.{metric}"] = result["per_kind"][kind][metric]
    return out


def missed(report: Mapping[str, Any]) -> list[str]:
    """The names of the targets the hybrid misses on the guarded splits (names stay put while
    the values move)."""
    guarded = {s: r for s, r in report["splits"].items() if s in GUARDED_SPLITS}
    return [name for name, _ in target_misses({**report, "splits": guarded})]


def baseline_of(report: Mapping[str, Any], embedder: str) -> dict[str, Any]:
    splits = {
        split: {name: figures(report["splits"][split][name]) for name in ("hybrid", *YARDSTICKS)}
        for split in GUARDED_SPLITS
    }
    return {
        "recorded": datetime.date.today().isoformat(),
        "embedder": embedder,
        "set": report["set"],
        "splits": splits,
        "missed_targets": missed(report),
    }


def regressions(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    """What the report does worse than the record, or where its yardsticks moved."""
    found = []
    if report["set"] != baseline["set"]:
        found.append(f"the set changed: {report['set']} != {baseline['set']}: record again")
    for split, recorded in baseline["splits"].items():
        for name, values in recorded.items():
            now = figures(report["splits"][split][name])
            for figure, then in values.items():
                value = now[figure]
                if then is None or value is None:
                    if then != value:
                        found.append(f"{split} {name} {figure}: {value} (recorded {then})")
                elif name == "hybrid" and value < then - 1e-9:
                    found.append(f"{split} hybrid {figure}: {value} < recorded {then}")
                elif name != "hybrid" and abs(value - then) > YARDSTICK_TOLERANCE:
                    found.append(f"{split} {name} {figure}: {value}, recorded {then}: record again")
    found.extend(
        f"target newly missed: {name}"
        for name in missed(report)
        if name not in baseline["missed_targets"]
    )
    return found
