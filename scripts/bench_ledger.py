"""Memory saves per second (encryption, key and index included) against raw insert commits.

For each writer count, in the same run and alternating in --rounds rounds on the same server:
raw psycopg single-row INSERT commits (one transaction each, one connection per writer thread) into
a table shaped like the events table, with a state as big as the ledger's stored events; and
`MemoryLedger.create_memory` calls (unique keys, one user per writer). Prints saves/s, inserts/s,
their ratio, ledger save latency, and the CPU time this process spent per save and per insert
(user + system, all threads): wall time minus it is the server, the disk and the waits. The
target is ratio >= 0.5 with one writer. The host's 1-minute load average is printed from before
and after: other work on the host slows both sides, but not alike, so compare runs at like load.
Everything lives in a throwaway schema `bench_<hex>`, dropped at the end (also on Ctrl-C).

    .venv/bin/python scripts/bench_ledger.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/bench_ledger.py --seconds 10 --writers 1,4,16 --json
    .venv/bin/python scripts/bench_ledger.py --count 2000     # operations per measurement
    .venv/bin/python scripts/bench_ledger.py --citus --database-url postgresql://...coordinator

--citus: the URL names a Citus coordinator; the ledger's tables are distributed by partition
(`memledger cluster distribute`'s code) and the raw table by a partition column of its own,
with as many shards; the report adds how the saves spread over the nodes.

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import platform
import sys
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
from _schemas import drop_schema, new_schema
from psycopg import sql

from api.bootstrap import build_ledger
from api.embedded import start_embedded_postgres
from api.settings import Settings
from domain.ledger.keyring import generate_master_key
from domain.ledger.persistence.cluster import distribute
from domain.model.values import Scope

TOPIC = "domain.model.memory:Memory.Created"
CONTENT = "I prefer examples before definitions #{}"
RAW_TABLE = (  # the shape of the ledger's events table
    "CREATE TABLE {} (partition int NOT NULL, originator_id uuid NOT NULL,"
    " originator_version bigint NOT NULL, topic text, state bytea, notification_id bigserial,"
    " PRIMARY KEY (partition, originator_id, originator_version))"
)
COLUMNS = {  # result key -> table heading
    "writers": "writers",
    "ledger_per_s": "ledger saves/s",
    "raw_per_s": "raw inserts/s",
    "ratio": "ratio",
    "ledger_p50_ms": "save p50 ms",
    "ledger_p95_ms": "save p95 ms",
    "ledger_cpu_ms": "save cpu ms",
    "raw_cpu_ms": "insert cpu ms",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    amount.add_argument("--count", type=int, help="operations per measurement (all writers)")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of raw and ledger")
    parser.add_argument("--writers", default="1,4,16", help="comma-separated writer counts")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--citus", action="store_true", help="the URL is a Citus coordinator")
    args = parser.parse_args()
    if args.citus and not args.database_url:
        parser.error("--citus needs --database-url (a Citus coordinator)")
    args.writers = [int(w) for w in args.writers.split(",") if w.strip()]
    if not args.writers or min(args.writers) < 1 or max(args.writers) > 100:
        parser.error("--writers: counts between 1 and 100")
    if args.rounds < 1 or args.seconds <= 0 or (args.count is not None and args.count < 1):
        parser.error("--rounds, --seconds and --count must be positive")
    return args


class Tally:
    """Operations, seconds and latencies summed over the rounds of one measurement."""

    def __init__(self) -> None:
        self.seconds, self.cpu_seconds, self.latencies = 0.0, 0.0, []

    def run(self, writers: int, op: Callable[[int], None], seconds: float, quota: int | None):
        """Run op(writer) in `writers` threads for `seconds`, or `quota` times per writer."""
        mine: list[list[float]] = [[] for _ in range(writers)]
        errors: list[BaseException] = []
        stop = threading.Event()

        def work(w: int) -> None:
            try:
                while not stop.is_set() and (quota is None or len(mine[w]) < quota):
                    began = time.perf_counter()
                    op(w)
                    mine[w].append(time.perf_counter() - began)
            except BaseException as error:
                errors.append(error)
                stop.set()

        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(writers)]
        cpu_began = _cpu_seconds()
        began = time.perf_counter()
        try:
            for thread in threads:
                thread.start()
            if quota is None:
                stop.wait(seconds)
                stop.set()
            for thread in threads:
                thread.join()
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        self.seconds += time.perf_counter() - began
        self.cpu_seconds += _cpu_seconds() - cpu_began
        if errors:
            raise errors[0]
        self.latencies += [t for times in mine for t in times]

    def summary(self, name: str) -> dict[str, float]:
        done = sorted(self.latencies)
        ms = {q: round(done[min(len(done) - 1, int(len(done) * q))] * 1000, 2) for q in (0.5, 0.95)}
        return {
            f"{name}_per_s": round(len(done) / self.seconds, 1),
            f"{name}_p50_ms": ms[0.5],
            f"{name}_p95_ms": ms[0.95],
            f"{name}_cpu_ms": round(self.cpu_seconds / len(done) * 1000, 3),
            f"{name}_ops": len(done),
        }


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def bench(url: str, schema: str, args: argparse.Namespace) -> dict:
    most = max(args.writers)
    settings = Settings(
        database_url=url,
        db_schema=schema,
        master_key=generate_master_key(),
        pool_size=most,
        max_overflow=most,
    )
    ledger = build_ledger(settings)
    conns: list[psycopg.Connection] = []
    try:
        runs = itertools.count()  # makes every memory key of the run unique

        def save(w: int) -> None:
            n = next(runs)
            outcome = ledger.create_memory(
                f"bench-user-{w}",
                scope=Scope.global_(),
                memory_key=f"k_{n}",
                content=CONTENT.format(n),
                category="preference",
            )
            assert outcome.status == "created", outcome.status

        partitions = len(ledger.heads())
        if args.citus:
            with psycopg.connect(url, autocommit=True) as conn:
                distribute(conn, schema, partitions)
        for w in range(most):  # warm up: user keys, pooled connections, prepared statements
            save(w)
        events = sql.Identifier(schema, ledger.recorder.events_table_name)
        raw = sql.Identifier(schema, "raw_events")
        with psycopg.connect(url, autocommit=True) as conn:
            state_size = conn.execute(
                sql.SQL("SELECT avg(length(state))::int FROM {}").format(events)
            ).fetchone()[0]
            conn.execute(sql.SQL(RAW_TABLE).format(raw))
            if not args.citus:  # a distributed table's unique indexes hold its partition
                conn.execute(sql.SQL("CREATE UNIQUE INDEX ON {} (notification_id)").format(raw))
            else:
                conn.execute(
                    "SELECT create_distributed_table(%s, 'partition', colocate_with => 'none',"
                    " shard_count => %s)",
                    (f"{schema}.raw_events", partitions),
                )
            names = ("server_version", "fsync", "synchronous_commit")
            values = conn.execute(
                "SELECT " + ", ".join(f"current_setting('{n}')" for n in names)
            ).fetchone()
        facts = {
            "nproc": len(os.sched_getaffinity(0)),
            "load_before": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "stored_event_bytes": state_size,
            **dict(zip(names, values, strict=True)),
        }
        conns += [psycopg.connect(url, autocommit=True) for _ in range(most)]
        insert = sql.SQL(
            "INSERT INTO {} (partition, originator_id, originator_version, topic, state)"
            " VALUES (%s, %s, 1, %s, %s)"
        ).format(raw)

        def raw_insert(w: int) -> None:
            row = (w % partitions, uuid.uuid4(), TOPIC, os.urandom(state_size))
            conns[w].execute(insert, row, prepare=True)

        for w in range(most):
            raw_insert(w)

        results = []
        for writers in args.writers:
            say(f"{writers} writer(s): {args.rounds} rounds of raw inserts, then ledger saves")
            seconds = args.seconds / args.rounds
            quota = args.count and -(-args.count // (args.rounds * writers))
            base, led = Tally(), Tally()
            for _ in range(args.rounds):  # alternate, so drift on the host hits both alike
                base.run(writers, raw_insert, seconds, quota)
                led.run(writers, save, seconds, quota)
            row = {"writers": writers, **led.summary("ledger"), **base.summary("raw")}
            results.append({**row, "ratio": round(row["ledger_per_s"] / row["raw_per_s"], 3)})
        if args.citus:
            facts["events_per_node"] = events_per_node(url, schema)
        one = next((r for r in results if r["writers"] == 1), None)
        facts["load_after"] = round(os.getloadavg()[0], 2)  # other work on the host skews both
        return {
            "machine": facts,
            "results": results,
            "target": {
                "one_writer_ratio": one and one["ratio"],
                "minimum": 0.5,
                "met": None if one is None else one["ratio"] >= 0.5,
            },
        }
    finally:
        for conn in conns:
            conn.close()
        ledger.close()


def events_per_node(url: str, schema: str) -> dict[str, int]:
    """The ledger's events on each node (host:port), from every shard's own count."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT s.nodename || ':' || s.nodeport, sum(r.result::bigint)"
            " FROM run_command_on_shards(%s, 'SELECT count(*) FROM %%s') r"
            " JOIN citus_shards s ON s.shardid = r.shardid GROUP BY 1 ORDER BY 1",
            (f"{schema}.memledger_events",),
        ).fetchall()
    return {node: int(count) for node, count in rows}


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def report(data: dict) -> None:
    facts = data["machine"]
    print(
        f"nproc {facts['nproc']}, PostgreSQL {facts['server_version']}, python {facts['python']},"
        f" fsync {facts['fsync']}, synchronous_commit {facts['synchronous_commit']},"
        f" stored event {facts['stored_event_bytes']} bytes,"
        f" load average {facts['load_before']} -> {facts['load_after']}"
    )
    if "events_per_node" in facts:
        spread = ", ".join(f"{node} {n}" for node, n in facts["events_per_node"].items())
        print(f"Citus: events per node: {spread}")
    print(" | ".join(COLUMNS.values()))
    for r in data["results"]:
        print(" | ".join(f"{r[k]:>{len(head)}}" for k, head in COLUMNS.items()))
    target = data["target"]
    if "events_per_node" in facts:  # the target is a single server's
        print("Citus: ratios against raw inserts into a distributed table; on one host the")
        print("nodes share its cores: a check of routing and spread, not of scale-out speed")
    elif target["met"] is None:
        print("1-writer target not measured (add 1 to --writers)")
    else:
        verdict = "meets" if target["met"] else "does NOT meet"
        print(f"1-writer ratio {target['one_writer_ratio']} {verdict} the >= 0.5 target")


def main() -> None:
    args = parse_args()
    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    schema = new_schema()
    try:
        data = bench(url, schema, args)
    finally:
        drop_schema(url, schema)
        say(f"dropped schema {schema}")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        report(data)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
