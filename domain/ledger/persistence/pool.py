"""Connection pools that hand out the connection returned last (LIFO), not the oldest.

psycopg_pool queues idle connections first in, first out: one writer with a pool of N cycles
through N server processes, each met with cold CPU caches, and none is ever idle long enough
for `max_idle` to close it. Handing out the most recently returned connection keeps a steady
load on as few backends as it needs (measured: ~0.15 ms less per save with one writer and a
pool of 16, scripts/bench_ledger.py), while the least recently used ones stay at the front of
the queue, where the pool's shrinking closes them after `max_idle`. The ledger's pool is
switched to LIFO by `use_lifo`; the API's read pool is a LifoReadPool (GET memory by id:
~8 % more requests/s in scripts/bench_api.py, alternated with the FIFO pool).
"""

from __future__ import annotations

from typing import Any

import psycopg_pool
from eventsourcing.postgres import ConnectionPool
from psycopg_pool import PoolTimeout, TooManyRequests

__all__ = ["LifoConnectionPool", "LifoReadPool", "use_lifo"]


def _get_ready_lifo(self: Any, timeout: float | None) -> Any:
    # psycopg_pool's own `_get_ready_connection` (3.2, 3.3) with pop() instead of popleft();
    # it runs with the pool's lock held. tests/integration/test_ledger_pool.py checks the order.
    if timeout is not None and timeout <= 0.0:
        raise PoolTimeout()
    conn = None
    if self._pool:
        conn = self._pool.pop()
        if len(self._pool) < self._nconns_min:
            self._nconns_min = len(self._pool)
    elif self.max_waiting and len(self._waiting) >= self.max_waiting:
        self._stats[self._REQUESTS_ERRORS] += 1
        raise TooManyRequests(
            f"the pool {self.name!r} has already {len(self._waiting)} requests waiting"
        )
    return conn


class LifoConnectionPool(ConnectionPool[Any]):
    """eventsourcing's ConnectionPool, taking idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo


class LifoReadPool(psycopg_pool.ConnectionPool[Any]):
    """psycopg_pool's ConnectionPool, taking idle connections from the recent end."""

    _get_ready_connection = _get_ready_lifo


def use_lifo(pool: ConnectionPool[Any]) -> None:
    """Make the pool the eventsourcing datastore built hand out its connections LIFO.

    The datastore constructs its pool itself, so the class of that pool is switched; the
    subclass adds no state, so this is safe whether the pool is open or not.
    """
    if type(pool) is ConnectionPool:
        pool.__class__ = LifoConnectionPool
