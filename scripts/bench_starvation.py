"""Does one kind of caller starve the others? A victim's searches, alone and under attack.

Starts `memledger serve` (the bundled e5 embedder, search cache off) on a free loopback port
with a throwaway schema (dropped at the end), seeds a victim and the attacker users, then:

1. unloaded: the victim runs --searches short searches, one at a time, each query new (so
   each is embedded: no query or result cache helps);
2. loaded: --attackers threads (spread over --attacker-users users) send 500-character
   searches as fast as they are answered, while the victim runs --searches new searches again.

Prints the victim's p50/p95 in both phases and the p95 ratio (target <= 3x), what the
attackers got (200 / 429 / 503), and how many searches the server answered lexically because
their query embedding was over its budget. `--unbounded` runs the server without the bounds
of issue 22 (no per-user search limit, the whole query embedded, no budget) for comparison.

    .venv/bin/python scripts/bench_starvation.py
    .venv/bin/python scripts/bench_starvation.py --unbounded

Bounded: --searches searches per phase, each phase at most --seconds; loopback only.
Without --database-url: MEMLEDGER_DATABASE_URL, else an embedded server in .memledger/.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import secrets
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from typing import Any

from _schemas import drop_schema
from bench_api import QUERIES, client, own_server, say, seed_in_process, wait_caught_up

from api.tokens import mint_token

LONG_WORDS = (
    "我更喜欢先看例子再看定义",
    "examples before definitions",
    "用 Python 和 PostgreSQL 构建一个记忆账本",
    "improve my reading speed every week",
    "解释要简短明了",
    "compare retrieval methods for long-term agent memory",
    "线性代数和概率论",
    "代码示例请使用类型标注",
)
UNBOUNDED = {
    "MEMLEDGER_USER_CONCURRENCY": "0",
    "MEMLEDGER_USER_SEARCH_CONCURRENCY": "0",
    "MEMLEDGER_QUERY_EMBED_CHARS": "2000",
    "MEMLEDGER_QUERY_EMBED_BUDGET": "60",
    "MEMLEDGER_QUERY_EMBED_SHARE": "0",
    "MEMLEDGER_MAX_CONCURRENCY": "0",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("MEMLEDGER_DATABASE_URL"))
    parser.add_argument("--attackers", type=int, default=8, help="attacking threads (8)")
    parser.add_argument("--attacker-users", type=int, default=2, help="users they share (2)")
    parser.add_argument("--searches", type=int, default=40, help="victim searches per phase")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most, per phase")
    parser.add_argument("--memories", type=int, default=60, help="memories per user")
    parser.add_argument("--unbounded", action="store_true", help="the server without bounds")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMLEDGER_X=VALUE",
        help="a setting of the server (repeatable), e.g. MEMLEDGER_QUERY_EMBED_CHARS=64",
    )
    args = parser.parse_args()
    if any(not s.startswith("MEMLEDGER_") or "=" not in s for s in args.set):
        parser.error("--set takes MEMLEDGER_NAME=VALUE")
    if not 1 <= args.attackers <= 64 or not 1 <= args.attacker_users <= args.attackers:
        parser.error("1 <= --attacker-users <= --attackers <= 64")
    if not 1 <= args.searches <= 1000 or not 1 <= args.seconds <= 600:
        parser.error("--searches 1..1000, --seconds 1..600")
    return args


def long_query(rng: random.Random) -> str:
    """A new 500-character query (mixed Chinese and English)."""
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < 520:
        words.append(rng.choice(LONG_WORDS) + str(rng.randrange(10**6)))
    return " ".join(words)[:500]


def victim_searches(url: str, token: str, count: int, seconds: float, tag: str) -> list[float]:
    """`count` new short searches, one at a time; their latencies in seconds."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with client(url, token) as http:
        for n in range(count):
            if time.monotonic() > deadline:
                break
            query = f"{QUERIES[n % len(QUERIES)]} {tag}{n}"
            began = time.perf_counter()
            response = http.post("/tools/search_core_memories", json={"query": query})
            latencies.append(time.perf_counter() - began)
            if response.status_code != 200:
                raise SystemExit(f"bench: victim got {response.status_code}: {response.text}")
    return latencies


def attack(url: str, token: str, stop: threading.Event, seen: Counter[str], seed: int) -> None:
    rng = random.Random(seed)
    with client(url, token) as http:
        while not stop.is_set():
            try:
                response = http.post("/tools/search_core_memories", json={"query": long_query(rng)})
                seen[str(response.status_code)] += 1
                if response.status_code in (429, 503):
                    stop.wait(float(response.headers.get("retry-after", "1")) / 10)
            except Exception as error:  # counted, not fatal: the bench reports it
                seen[type(error).__name__] += 1


def metric(url: str, name: str) -> float:
    with client(url) as http:
        for line in http.get("/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return 0.0


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if len(values) > 1 else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from api.embedded import start_embedded_postgres
    from api.settings import Settings
    from domain.ledger.keyring import generate_master_key

    url = args.database_url or start_embedded_postgres(pathlib.Path(".memledger/bench-postgres"))
    schema = f"benchstarve_{uuid.uuid4().hex[:12]}"
    master_key, secret = generate_master_key(), secrets.token_urlsafe(32)
    settings = Settings(database_url=url, db_schema=schema, master_key=master_key)  # type: ignore[call-arg]
    victim = "victim"
    attackers = [f"attacker{i}" for i in range(args.attacker_users)]
    workdir = tempfile.TemporaryDirectory(prefix="bench_starvation_")
    log = pathlib.Path(workdir.name) / "server.log"
    try:
        for user in (victim, *attackers):
            seed_in_process(settings, user, args.memories, 2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")} | {
            "MEMLEDGER_DATABASE_URL": url,
            "MEMLEDGER_SCHEMA": schema,
            "MEMLEDGER_MASTER_KEY": master_key,
            "MEMLEDGER_JWT_SECRET": secret,
            "MEMLEDGER_DATA_DIR": str(pathlib.Path(workdir.name) / "data"),
            "MEMLEDGER_SEARCH_CACHE_TTL": "0",
        }
        if args.unbounded:
            env |= UNBOUNDED
        env |= dict(s.split("=", 1) for s in args.set)
        with own_server(env, log) as server:
            say(f"server {server} (log {log}); waiting for projections and embeddings")
            wait_caught_up(server, timeout=600, process_log=log)
            token = mint_token(secret, victim, workspace="learning")
            victim_searches(server, token, 5, args.seconds, "warm")  # model and keys warm
            say(f"unloaded: {args.searches} victim searches")
            alone = victim_searches(server, token, args.searches, args.seconds, "a")
            stop, seen = threading.Event(), Counter[str]()
            timeouts = metric(server, "memledger_query_embedding_timeouts_total")
            threads = [
                threading.Thread(
                    target=attack,
                    args=(
                        server,
                        mint_token(secret, attackers[i % len(attackers)], workspace="learning"),
                        stop,
                        seen,
                        i,
                    ),
                    daemon=True,
                )
                for i in range(args.attackers)
            ]
            for thread in threads:
                thread.start()
            time.sleep(2.0)  # the attack under way
            say(f"loaded: {args.attackers} attackers, {args.searches} victim searches")
            loaded = victim_searches(server, token, args.searches, args.seconds, "b")
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            timeouts = metric(server, "memledger_query_embedding_timeouts_total") - timeouts
        return {
            "unbounded": args.unbounded,
            "set": args.set,
            "victim_unloaded_ms": (p(alone, 50), p(alone, 95)),
            "victim_loaded_ms": (p(loaded, 50), p(loaded, 95)),
            "ratio_p95": p(loaded, 95) / p(alone, 95),
            "attackers": dict(seen),
            "lexical_fallbacks": int(timeouts),
            "load": os.getloadavg(),
        }
    finally:
        drop_schema(url, schema)
        workdir.cleanup()


def main() -> None:
    args = parse_args()
    data = run(args)
    bounds = "off (--unbounded)" if data["unbounded"] else "on"
    print(f"server bounds: {bounds}; settings {data['set'] or 'default'}")
    print("victim p50 / p95 unloaded: {:.1f} / {:.1f} ms".format(*data["victim_unloaded_ms"]))
    print("victim p50 / p95 loaded:   {:.1f} / {:.1f} ms".format(*data["victim_loaded_ms"]))
    print(f"p95 ratio loaded/unloaded: {data['ratio_p95']:.2f}x (target <= 3x)")
    print(f"attackers' answers: {data['attackers']}")
    print(f"searches answered lexically (embedding over budget): {data['lexical_fallbacks']}")
    print("load average: {:.2f} {:.2f} {:.2f}".format(*data["load"]))


if __name__ == "__main__":
    main()
