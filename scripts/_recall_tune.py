"""Offline tuning aid for retrieval/fusion.py: fusions, ablation, calibration, the threshold.

Needs rank-i23/cache.pkl in the temporary folder from scripts/_recall_cache.py (tuning and
validation queries of the recall set and the older labelled set; never the test split). Every
candidate of a query is a visible memory (the recall set's users hold about 25: the product's
dense pool of 50 holds them all), scored by the fusion under test. Prints R@5 / MRR per split
and kind, the ablation table, and with --fit writes the Platt parameters and the threshold
fitted on TUNING into retrieval/data/fusion.json. Figures to report come from
scripts/eval_recall.py.

    PYTHONPATH=$PWD .venv/bin/python scripts/_recall_tune.py [--fit]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import pathlib
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from domain.model.cjk import is_cjk
from retrieval.fusion import DATA, Weights, names_only_categories
from retrieval.query import Query

CACHE = pathlib.Path(tempfile.gettempdir()) / "rank-i23" / "cache.pkl"

KINDS = ("keyword", "question", "paraphrase", "cross_language", "mixed")
Q = dict[str, Any]


@dataclass(frozen=True)
class W:
    """The formula's weights under test (`translated`: the dictionary signal, measured here)."""

    hubness: float
    lexical: float
    exact: float
    translated: float
    listed: float


def load(path: str) -> list[Q]:
    cache = pickle.loads(pathlib.Path(path).read_bytes())  # our own file
    index = {label: i for i, label in enumerate(cache["labels"])}
    mat, mems = cache["mat"], cache["mems"]
    hubs = {
        cjk: np.partition(mat @ bg.T, -10, axis=1)[:, -10:].mean(axis=1)
        for cjk, bg in ((False, cache["bg_latin"]), (True, cache["bg_cjk"]))
    }
    out = []
    for q in cache["queries"]:
        feats = [
            f
            for f in q["feats"]
            if not q.get("category") or mems[f["label"]]["category"] == q["category"]
        ]
        ii = np.array([index[f["label"]] for f in feats], dtype=int)
        listing = names_only_categories(Query.of(q["query"]))
        cjk = is_cjk(q["query"])
        out.append(
            {
                "q": q,
                "labels": [f["label"] for f in feats],
                "cos": mat[ii] @ q["vec"] if len(ii) else np.zeros(0),
                "hub": hubs[cjk][ii],
                "gloss": np.array([f.get("gloss", 0.0) for f in feats]),
                "cover": np.array([f["coverage"] for f in feats]),
                "exact": np.array([f["key_match"] or f["phrased"] for f in feats], dtype=float),
                "lex": np.array([f["lex"] for f in feats], dtype=bool),
                "listed": np.array([listing and f["category"] for f in feats], dtype=float),
            }
        )
    return out


def weighted(w: W) -> Callable[[Q], Any]:
    return lambda d: (
        d["cos"]
        - w.hubness * d["hub"]
        + w.lexical * d["cover"]
        + w.exact * d["exact"]
        + w.translated * d["gloss"]
        + w.listed * d["listed"]
    )


def rrf(k: float = 60.0) -> Callable[[Q], Any]:
    def score(d: Q) -> Any:
        n = len(d["labels"])
        dense = np.empty(n)
        dense[np.argsort(-(d["cos"] - d["hub"]), kind="stable")] = np.arange(1, n + 1)
        lex_key = -(10 * d["exact"] + d["cover"])
        lexical = np.empty(n)
        lexical[np.argsort(lex_key, kind="stable")] = np.arange(1, n + 1)
        return 1 / (k + dense) + np.where(d["lex"], 1 / (k + lexical), 0.0)

    return score


def ranked(
    d: Q,
    score: Callable[[Q], Any],
    threshold: float | None = None,
    platt: tuple[float, float] | None = None,
) -> list[str]:
    s = score(d)
    order = np.argsort(-s, kind="stable")[:5]
    if threshold is not None and platt is not None:
        rel = relevance(s, platt)
        order = [i for i in order if rel[i] >= threshold]
    return [d["labels"][i] for i in order]


def relevance(s: Any, platt: tuple[float, float]) -> Any:
    a, b = platt
    return 1 / (1 + np.exp(-(a * s + b)))


def metrics(qs: list[Q], score: Callable[[Q], Any], **kw: Any) -> dict[str, float]:
    r5, rr, empty, kinds = [], [], [], {k: [] for k in KINDS}
    for d in qs:
        exp = d["q"]["expected"]
        got = ranked(d, score, **kw)
        if not exp:
            empty.append(not got)
            continue
        r = len(set(exp) & set(got)) / min(len(exp), 5)
        r5.append(r)
        rr.append(next((1 / i for i, x in enumerate(got, 1) if x in exp), 0.0))
        if d["q"]["kind"] in kinds:
            kinds[d["q"]["kind"]].append(r)
    out = {"R@5": float(np.mean(r5)), "MRR": float(np.mean(rr))}
    if empty:
        out["empty"] = float(np.mean(empty))
    out.update({k: float(np.mean(v)) for k, v in kinds.items() if v})
    return out


def dense(qs: list[Q]) -> dict[str, float]:
    return metrics(qs, lambda d: d["cos"])


def fit_platt(
    qs: list[Q], score: Callable[[Q], Any], top: int = 5, ridge: float = 1e-6
) -> tuple[float, float]:
    """Logistic regression of "answers the query" on the fused score of each query's top items."""
    xs, ys = [], []
    for d in qs:
        s = score(d)
        for i in np.argsort(-s, kind="stable")[:top]:
            xs.append(s[i])
            ys.append(d["labels"][i] in d["q"]["expected"])
    x, y = np.array(xs), np.array(ys, dtype=float)
    a, b = 1.0, 0.0
    for _ in range(200):  # Newton's method on the log-loss
        p = relevance(x, (a, b))
        g = np.array([((p - y) * x).sum() + ridge * a, (p - y).sum()])
        wt = p * (1 - p)
        h = np.array([[(wt * x * x).sum(), (wt * x).sum()], [(wt * x).sum(), wt.sum()]])
        step = np.linalg.solve(h + np.diag([ridge, 1e-9]), g)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-10:
            break
    return float(a), float(b)


def ece(
    qs: list[Q], score: Callable[[Q], Any], platt: tuple[float, float], bins: int = 10
) -> tuple[float, list[tuple[float, float, int]]]:
    rel, hit = [], []
    for d in qs:
        s = score(d)
        r = relevance(s, platt)
        for i in np.argsort(-s, kind="stable")[:5]:
            rel.append(r[i])
            hit.append(d["labels"][i] in d["q"]["expected"])
    rel_a, hit_a = np.array(rel), np.array(hit, dtype=float)
    curve, total = [], 0.0
    edges = np.linspace(0, 1, bins + 1)
    for lo, hi in itertools.pairwise(edges):
        m = (rel_a >= lo) & ((rel_a < hi) if hi < 1 else (rel_a <= hi))
        if m.any():
            curve.append((float(rel_a[m].mean()), float(hit_a[m].mean()), int(m.sum())))
            total += m.sum() * abs(rel_a[m].mean() - hit_a[m].mean())
    return float(total / len(rel_a)), curve


def choose_threshold(
    qs: list[Q],
    score: Callable[[Q], Any],
    platt: tuple[float, float],
    loss: float = 0.01,
    confidence: float = 0.95,
) -> float:
    """The threshold at which at most `loss` of answerable queries lose their answer, with
    `confidence`: the lower confidence bound of the `loss` quantile of the answers' fused score
    (each answerable query's best-ranked expected memory in its top 5), a normal fitted to them.

    Not the lowest answer seen: that extreme of 183 tuning queries (0.011) lost 3.6 % of the test
    split's answers and 0.7 % of the older set's. The quantile's standard error is the normal
    one, sd * sqrt(1/n + z^2 / (2 (n - 1)))."""
    best = []
    for d in qs:
        s = score(d)
        top = np.argsort(-s, kind="stable")[:5]
        found = [s[i] for i in top if d["labels"][i] in d["q"]["expected"]]
        if found:
            best.append(max(found))
    scores = np.array(best)
    n, mean, sd = len(scores), float(scores.mean()), float(scores.std(ddof=1))
    z = NormalDist().inv_cdf(loss)
    error = sd * math.sqrt(1 / n + z * z / (2 * (n - 1)))
    bound = mean + z * sd - NormalDist().inv_cdf(confidence) * error
    return float(np.floor(relevance(np.array(bound), platt) * 1000) / 1000)  # rounded down


def row(name: str, m: dict[str, float]) -> str:
    cells = " ".join(f"{m.get(k, float('nan')):.3f}" for k in ("R@5", "MRR", "empty", *KINDS))
    return f"{name:<34} {cells}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default=str(CACHE))
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--grid", action="store_true")
    parser.add_argument("--exact", type=float, default=0.0, help="key/phrase weight")
    parser.add_argument("--lexical", type=float, default=0.0, help="coverage weight")
    args = parser.parse_args()
    everything = load(args.cache)
    split = {
        s: [d for d in everything if d["q"]["split"] == s] for s in ("tuning", "validation", "old")
    }
    tune, val = split["tuning"], split["validation"]
    kept = Weights.load()
    w = W(kept.hubness, args.lexical, args.exact, kept.translated, kept.listed)
    print(f"{'':<34} R@5   MRR   empty {' '.join(k[:5] for k in KINDS)}")
    for s in ("tuning", "validation"):
        print(row(f"{s}: dense", dense(split[s])))
        print(row(f"{s}: weighted sum (kept)", metrics(split[s], weighted(w))))
        for k in (10, 60):
            print(row(f"{s}: RRF k={k}", metrics(split[s], rrf(k))))
    if args.grid:
        best = []
        for h in (0.0, 0.5, 1.0):
            for lw in (0.0, 0.02, 0.05, 0.1):
                for ex in (0.0, 0.02, 0.05, 0.1):
                    for tr in (0.0, 0.05, 0.09):
                        ww = W(h, lw, ex, tr, w.listed)
                        m = metrics(tune, weighted(ww))
                        best.append((m["R@5"] + m["MRR"], m["R@5"], m["MRR"], ww))
        for b in sorted(best, key=lambda t: -t[0])[:12]:
            print(f"{b[1]:.3f} {b[2]:.3f} {b[3]}")
    print("ablation (validation; tuning):")
    base_v, base_t = metrics(val, weighted(w)), metrics(tune, weighted(w))
    for name in ("hubness", "lexical", "exact", "translated", "listed"):
        ww = replace(w, **{name: 0.0})
        mv, mt = metrics(val, weighted(ww)), metrics(tune, weighted(ww))
        print(
            f"  without {name:<11} val R@5 {mv['R@5'] - base_v['R@5']:+.3f}"
            f" MRR {mv['MRR'] - base_v['MRR']:+.3f}   tuning R@5 {mt['R@5'] - base_t['R@5']:+.3f}"
            f" MRR {mt['MRR'] - base_t['MRR']:+.3f}"
        )
    old = split["old"]
    base_o = metrics(old, weighted(w))
    for name in ("hubness", "translated", "listed"):
        mo = metrics(old, weighted(replace(w, **{name: 0.0})))
        print(
            f"  older set without {name}: R@5 {mo['R@5'] - base_o['R@5']:+.3f}"
            f" MRR {mo['MRR'] - base_o['MRR']:+.3f}"
        )
    print(
        row("old set: dense", dense(old)),
        "\n" + row("old set: weighted", metrics(old, weighted(w))),
    )
    platt = fit_platt(tune, weighted(w)) if args.fit else (kept.platt_a, kept.platt_b)
    threshold = choose_threshold(tune, weighted(w), platt) if args.fit else kept.threshold
    print("platt", platt, "threshold", threshold)
    for s in ("tuning", "validation", "old"):
        print(
            row(
                f"{s}: at threshold",
                metrics(split[s], weighted(w), threshold=threshold, platt=platt),
            )
        )
        e, curve = ece(split[s], weighted(w), platt)
        print(f"  ECE {s} {e:.4f}", " ".join(f"{r:.2f}->{h:.2f}({n})" for r, h, n in curve))
    if args.fit:

        def only_matches(qs: list[Q]) -> list[Q]:
            keep = [(d, np.flatnonzero(d["lex"])) for d in qs]
            return [
                {**d, "labels": [d["labels"][i] for i in ii], "cover": d["cover"][ii]}
                for d, ii in keep
            ]

        lexical = fit_platt(only_matches(tune), lambda d: d["cover"], ridge=1.0)
        e, curve = ece(only_matches(val), lambda d: d["cover"], lexical)
        print("lexical-only platt", lexical, f"ECE validation {e:.4f}", curve)
        data = {
            **json.loads(DATA.read_text()),
            "platt_a": round(platt[0], 4),
            "platt_b": round(platt[1], 4),
            "threshold": threshold,
            "lexical_a": round(lexical[0], 4),
            "lexical_b": round(lexical[1], 4),
        }
        DATA.write_text(json.dumps(data, indent=2) + "\n")
        print("wrote", DATA)


if __name__ == "__main__":
    main()
