"""Legacy import speed against the ledger's own save rate, measured in the same run.

Generates the 10,000-row legacy file of the tests (500 users, 20 rows each, with secrets,
invalid rows, key collisions and unmapped users; see tests/migration/synthetic.py), imports it
with `memledger migrate legacy` (as a function, --workers as given) into a throwaway schema per
measurement, and runs scripts/bench_ledger.py for one writer on the same server before and after
(the ratio uses the mean of the two). Prints import
rows/s (every legacy row, skipped ones included), imported memories/s, ledger saves/s and the
ratios. Schemas `bench_<hex>` are dropped at the end (also on Ctrl-C).

    .venv/bin/python scripts/bench_import.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/bench_import.py --workers 1,4,8 --ledger-seconds 10 --json

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from _schemas import drop_schema, new_schema

from api.bootstrap import build_ledger
from api.embedded import start_embedded_postgres
from api.settings import Settings
from domain.ledger.keyring import generate_master_key
from migration.migrate import migrate_legacy

HERE = pathlib.Path(__file__).resolve().parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--workers", default="1,4", help="comma-separated import worker counts")
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--rows-per-user", type=int, default=20)
    parser.add_argument(
        "--ledger-seconds", type=float, default=5.0, help="bench_ledger.py --seconds"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",") if w.strip()]
    if not args.workers or min(args.workers) < 1 or max(args.workers) > 32:
        parser.error("--workers: counts between 1 and 32")
    return args


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def measure_import(url: str, folder: pathlib.Path, workers: int) -> dict[str, float]:
    """One import of the generated file into a fresh schema."""
    schema = new_schema()
    settings = Settings(
        database_url=url,
        db_schema=schema,
        master_key=generate_master_key(),
        pool_size=max(workers, 1),
        max_overflow=workers,
    )
    try:
        ledger = build_ledger(settings)
        try:
            run = migrate_legacy(
                ledger,
                folder / "core_memory.db",
                folder / "users.csv",
                workers=workers,
                report=folder / f"report-{schema}.jsonl",
                out=io.StringIO(),
                log=io.StringIO(),
            )
        finally:
            ledger.close()
    finally:
        drop_schema(url, schema)
    if run.exit_code != 0:
        raise SystemExit(f"bench: the import did not add up (exit {run.exit_code})")
    totals = run.result.totals()
    seconds = run.info.seconds
    return {
        "workers": workers,
        "rows": totals["legacy_rows"],
        "imported": totals["imported"],
        "seconds": round(seconds, 2),
        "rows_per_s": round(totals["legacy_rows"] / seconds, 1),
        "imported_per_s": round(totals["imported"] / seconds, 1),
    }


def measure_ledger(url: str, seconds: float) -> dict[str, float]:
    """scripts/bench_ledger.py for one writer, on the same server."""
    command = [sys.executable, str(HERE / "bench_ledger.py"), "--database-url", url]
    command += ["--writers", "1", "--seconds", str(seconds), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench: bench_ledger.py failed:\n{done.stderr}")
    result = json.loads(done.stdout)["results"][0]
    return {"ledger_per_s": result["ledger_per_s"], "raw_per_s": result["raw_per_s"]}


def main() -> None:
    args = parse_args()
    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    # The host's speed drifts: measure the ledger before and after the imports, use the mean.
    say(f"bench_ledger.py, 1 writer, {args.ledger_seconds}s (before the imports)")
    before = measure_ledger(url, args.ledger_seconds)
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        folder = pathlib.Path(tmp)
        sys.path.insert(0, str(HERE.parent))  # the tests' generator, tests/migration/synthetic.py
        from tests.migration.synthetic import write_legacy_file

        expected = write_legacy_file(folder, users=args.users, rows_per_user=args.rows_per_user)
        say(f"generated {expected.rows} legacy rows over {args.users} users in {folder}")
        imports = []
        for workers in args.workers:
            say(f"importing with {workers} worker(s)")
            imports.append(measure_import(url, folder, workers))
    say(f"bench_ledger.py, 1 writer, {args.ledger_seconds}s (after the imports)")
    after = measure_ledger(url, args.ledger_seconds)
    ledger = {
        "ledger_per_s": round((before["ledger_per_s"] + after["ledger_per_s"]) / 2, 1),
        "before_per_s": before["ledger_per_s"],
        "after_per_s": after["ledger_per_s"],
        "raw_per_s": round((before["raw_per_s"] + after["raw_per_s"]) / 2, 1),
    }
    for row in imports:
        row["rows_vs_ledger"] = round(row["rows_per_s"] / ledger["ledger_per_s"], 2)
        row["imported_vs_ledger"] = round(row["imported_per_s"] / ledger["ledger_per_s"], 2)
    data = {"imports": imports, "ledger_one_writer": ledger}
    if args.json:
        print(json.dumps(data, indent=2))
        return
    print(
        f"ledger (scripts/bench_ledger.py, 1 writer): {ledger['ledger_per_s']} saves/s, mean of"
        f" {ledger['before_per_s']} before and {ledger['after_per_s']} after the imports"
        f" (raw inserts {ledger['raw_per_s']}/s)"
    )
    columns = {
        "workers": "workers",
        "rows": "rows",
        "imported": "imported",
        "seconds": "seconds",
        "rows_per_s": "rows/s",
        "imported_per_s": "imported/s",
        "rows_vs_ledger": "rows/s / saves/s",
        "imported_vs_ledger": "imported/s / saves/s",
    }
    print(" | ".join(columns.values()))
    for r in imports:
        print(" | ".join(f"{r[k]:>{len(head)}}" for k, head in columns.items()))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
