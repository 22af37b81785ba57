"""Catch-up of the live tables by several projection processes sharing the partitions.

What `memledger projections run` started N times does: each process runs the projection
worker's live loop (`ProjectionWorker.run`, every projection but embeddings), a member of one
lease group, so the processes split the ledger's partitions (projections/leases.py) and
rebalance as they join. Timed from the moment every process is ready (imports done, ledger and
pool open) until every (projection, partition) position of the tracking table reaches its
partition's head, read from this process; the leases' start-up and rebalancing are inside
that time, as they are in production.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import psycopg

from api.bootstrap import build_ledger, build_worker
from api.settings import Settings
from projections.registry import main_projections
from projections.tracking import Tables, read_positions

__all__ = ["catch_up_in_processes"]

_POLL = 0.02  # seconds between reads of the tracking table
_SPAWN = multiprocessing.get_context("spawn")  # no pool, lock or thread crosses a fork


def catch_up_in_processes(
    settings: Settings, url: str, heads: dict[int, int], processes: int, timeout: float = 600.0
) -> dict[str, Any]:
    """Start `processes` workers, wait until they are ready, then time their catch-up to
    `heads` (partition -> position). The projection tables must exist and be empty."""
    ready = _SPAWN.Barrier(processes + 1)
    done = _SPAWN.Event()
    members = [
        _SPAWN.Process(target=_member, args=(settings, url, ready, done), daemon=True)
        for _ in range(processes)
    ]
    for member in members:
        member.start()
    try:
        ready.wait(timeout=120)
        began = time.perf_counter()
        names = [p.name for p in main_projections()]
        deadline = time.monotonic() + timeout
        with psycopg.connect(url, autocommit=True) as conn:
            while not _caught_up(conn, settings.db_schema, names, heads):
                if time.monotonic() > deadline or not all(m.is_alive() for m in members):
                    raise RuntimeError("bench: the catch-up processes did not catch up")
                time.sleep(_POLL)
        seconds = time.perf_counter() - began
    finally:
        done.set()
        for member in members:
            member.join(timeout=30)
            if member.is_alive():
                member.kill()
    events = sum(heads.values())
    return {
        "processes": processes,
        "events": events,
        "seconds": round(seconds, 3),
        "events_per_second": round(events / seconds, 1),
    }


def _caught_up(
    conn: psycopg.Connection[Any], schema: str, names: list[str], heads: dict[int, int]
) -> bool:
    positions = read_positions(conn, Tables(schema))
    return all(
        positions.get((name, partition), 0) >= head
        for name in names
        for partition, head in heads.items()
        if head
    )


def _member(settings: Settings, url: str, ready: Any, done: Any) -> None:
    """One `projections run`: the live loop in a thread until the parent says done."""
    ledger = build_ledger(settings, url)
    worker = build_worker(settings, ledger, url, ensure=False)
    try:
        ready.wait(timeout=120)
        worker.start()
        done.wait()
        worker.stop(timeout=30)
    finally:
        worker.pool.close()
        ledger.close()
