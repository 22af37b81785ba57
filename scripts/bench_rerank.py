"""The reranker stage's added latency: search with and without it, against a fake /rerank server.

The older labelled set (tests/retrieval/memories.jsonl, 241 memories of 4 users) is written
through the product as scripts/eval_recall.py does (`running_product`: the app wired as
`memledger serve` wires it, bundled e5 embedder, search cache off, a throwaway schema). A fake
reranker (tests/rerank_server.py: a threaded http.server on 127.0.0.1 in a process of its
own, answering at once, or after --server-delay-ms) stands in for a real one, so what is
measured is the stage's own cost: the request, the JSON both ways, the thread hop and the
reordering. It scores the candidates in the order it gets them, and every search asks
min_relevance 0, so each variant returns the same items in the same order: only the stage
differs. Each of --queries queries of tests/retrieval/queries.jsonl goes to
`POST /tools/search_core_memories` once per variant, the variants alternated within each of
--rounds rounds, after a warm-up pass (query vectors cached, connections open): `off` (the
fused order), `tei` and `cohere` (the two request shapes, the first --top candidates
reranked). Printed: p50 / p95 of each and the difference to `off`, the mean time of the stage
within those searches, and the stage alone (`Reranker.rerank` of 10 candidates, in-process).

    .venv/bin/python scripts/bench_rerank.py
    .venv/bin/python scripts/bench_rerank.py --rounds 5 --server-delay-ms 20 --json

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from evaluation.product import running_product
from evaluation.scoring import percentile
from retrieval.query import Query, Scored, SearchRow
from retrieval.rerank import Reranker
from retrieval.rerankers import HttpScorer
from retrieval.search import MemorySearch

REPO_ROOT: Final = pathlib.Path(__file__).resolve().parent.parent

SET: Final = REPO_ROOT / "tests" / "retrieval"
VARIANTS: Final = ("off", "tei", "cohere")


def _jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _ms(values: Sequence[float], share: float) -> float:
    found = percentile(values, share)
    return round((found or 0.0) * 1000, 2)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    memories = _jsonl(SET / "memories.jsonl")
    queries = _jsonl(SET / "queries.jsonl")[: args.queries]
    budget = 2.0  # generous: the fake answers at once; a timeout would measure nothing
    with running_product(args.database_url) as product, fake_server(args) as url:
        for memory in memories:
            product.create(memory)
        product.settle()
        plain = product.services.search
        rerankers = {
            api: Reranker(HttpScorer(url, api=api, timeout=budget), top=args.top, budget=budget)
            for api in ("tei", "cohere")
        }
        searches = {"off": plain} | {
            api: MemorySearch(None, vectors=plain.vectors, reranker=r)
            for api, r in rerankers.items()
        }

        def run(variant: str, query: dict[str, Any]) -> float:
            product.services.search = searches[variant]
            # min_relevance 0: as many items with the reranker (0.99 .. 0.90) as without
            return product.search(query["user"], query["workspace"], query["query"], 0.0)[1]

        for query in queries:  # warm-up: query vectors, matrices, connections
            for variant in VARIANTS:
                run(variant, query)
        seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for round_ in range(args.rounds):
            for i, query in enumerate(queries):
                shift = (i + round_) % len(VARIANTS)  # each variant first in turn
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    seconds[variant].append(run(variant, query))
        product.services.search = plain
        states = {api: r.state() for api, r in rerankers.items()}
        stage = _stage_alone(rerankers["tei"], args.rounds * len(queries))
    report: dict[str, Any] = {
        "memories": len(memories),
        "queries": len(queries),
        "rounds": args.rounds,
        "top": args.top,
        "server_delay_ms": args.server_delay_ms,
        "search": {},
        "stage_alone_tei": stage,
        "outcomes": {
            api: {"applied": s.applied, "timeout": s.timeouts, "error": s.errors}
            for api, s in states.items()
        },
        "stage_in_search_mean_ms": {
            api: round(s.seconds / max(1, s.applied + s.timeouts + s.errors) * 1000, 2)
            for api, s in states.items()
        },
    }
    base = seconds["off"]
    for variant, values in seconds.items():
        report["search"][variant] = {
            "p50_ms": _ms(values, 0.5),
            "p95_ms": _ms(values, 0.95),
            "added_p50_ms": round(_ms(values, 0.5) - _ms(base, 0.5), 2),
            "added_p95_ms": round(_ms(values, 0.95) - _ms(base, 0.95), 2),
        }
    return report


@contextmanager
def fake_server(args: argparse.Namespace) -> Iterator[str]:
    """The fake reranker in a process of its own, scoring in the order it is sent (the fused
    order kept: the same items, only the stage differs); its URL."""
    command = [sys.executable, "-m", "tests.rerank_server", "--descending"]
    command += ["--delay-ms", str(args.server_delay_ms)]
    server = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _stage_alone(reranker: Reranker, count: int) -> dict[str, float]:
    """`Reranker.rerank` of 10 candidates of about 80 characters, `count` times."""
    from datetime import UTC, datetime
    from uuid import uuid4

    now = datetime.now(UTC)
    text = "I prefer short explanations with a worked example before the definition. "
    candidates = [
        Scored(
            SearchRow(
                uuid4(), f"k{i}", text + str(i), "fact", "global", None, "explicit", "active", now
            ),
            0.5,
        )
        for i in range(10)
    ]
    query = Query.of("how do I like explanations")
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        reranker.rerank(query, candidates)
        seconds.append(time.perf_counter() - started)
    return {"p50_ms": _ms(seconds, 0.5), "p95_ms": _ms(seconds, 0.95)}


def render(report: dict[str, Any]) -> str:
    lines = [
        f"{report['memories']} memories, {report['queries']} queries x {report['rounds']} rounds,"
        f" top {report['top']} reranked, fake server delay {report['server_delay_ms']} ms",
        "",
        "| reranker | p50 | p95 | added p50 | added p95 |",
        "|---|---|---|---|---|",
    ]
    for variant, s in report["search"].items():
        lines.append(
            f"| {variant} | {s['p50_ms']} ms | {s['p95_ms']} ms | {s['added_p50_ms']} ms"
            f" | {s['added_p95_ms']} ms |"
        )
    stage = report["stage_alone_tei"]
    lines.append(
        f"\nthe stage alone (tei, 10 candidates): p50 {stage['p50_ms']} ms,"
        f" p95 {stage['p95_ms']} ms"
    )
    lines.append(f"the stage within the searches, mean: {report['stage_in_search_mean_ms']} ms")
    lines.append(f"outcomes: {report['outcomes']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("MEMLEDGER_DATABASE_URL"),
        help="default: MEMLEDGER_DATABASE_URL, else an embedded server",
    )
    parser.add_argument("--queries", type=int, default=100, help="queries of the set (100)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over them (3)")
    parser.add_argument("--top", type=int, default=10, help="candidates reranked (10)")
    parser.add_argument(
        "--server-delay-ms", type=float, default=0.0, help="the fake server's own time (0)"
    )
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    args = parser.parse_args(argv)
    report = measure(args)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
