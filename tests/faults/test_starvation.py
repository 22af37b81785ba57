"""Long queries cannot starve other users (issue 22, finding 3), against a real server with the
bundled embedder: 8 callers of 2 users send 500-character searches while a victim searches.

The attackers get 429 with Retry-After (one search per user in flight), nobody gets a 5xx, and
every victim search is answered. The victim's latency is printed, not asserted: the ratio to
its unloaded p95 is what scripts/bench_starvation.py reports (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

import httpx2
import pytest

from tests.faults.harness import BOUND, SLACK, Call, FaultServer, timed

pytestmark = [pytest.mark.integration, pytest.mark.faults]

ATTACKERS, ATTACK_USERS, SECONDS = 8, 2, 8.0
LONG = ("我想知道每周学习多久才合适 how long should I study every week " * 12)[:500]


def search(client: httpx2.Client, query: str) -> Call:
    return timed(client, "POST", "/tools/search_core_memories", json={"query": query})[0]


def victim_searches(client: httpx2.Client, n: int) -> list[Call]:
    return [search(client, f"weekday study time {i}") for i in range(n)]


def p95(calls: list[Call]) -> float:
    return statistics.quantiles([c.seconds for c in calls], n=20)[-1] * 1000


def test_eight_long_query_callers_get_429_and_the_victim_is_served(
    make_server: Callable[..., FaultServer],
) -> None:
    server = make_server()
    server.env.pop("MEMLEDGER_EMBEDDER")  # the bundled model: the query embedding is the cost
    server.start()
    for user in ("victim", *(f"attacker{i}" for i in range(ATTACK_USERS))):
        with server.client(user, workspace="learning") as client:
            body = {
                "memory_key": "study_time",
                "content": "weekday study time is one hour",
                "category": "constraint",
                "scope_type": "global",
            }
            assert timed(client, "POST", "/tools/save_core_memory", json=body)[0].status == 200

    with server.client("victim", workspace="learning") as victim:
        alone = victim_searches(victim, 20)
        stop = threading.Event()
        attacks: list[Call] = []

        def attack(i: int) -> None:
            with server.client(f"attacker{i % ATTACK_USERS}", workspace="learning") as client:
                while not stop.is_set():
                    attacks.append(search(client, LONG))

        threads = [threading.Thread(target=attack, args=(i,)) for i in range(ATTACKERS)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        loaded = victim_searches(victim, 20)
        while time.monotonic() - started < SECONDS:
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join(timeout=BOUND + 35)

    print(f"victim p95 alone {p95(alone):.0f} ms, under attack {p95(loaded):.0f} ms")
    assert {c.status for c in alone + loaded} == {200}
    refused = [c for c in attacks if c.status == 429]
    assert refused and all(c.retry_after for c in refused)
    assert {c.status for c in attacks} <= {200, 429}, {c.status for c in attacks}
    assert all(c.seconds < BOUND + SLACK for c in alone + loaded + attacks)
