"""Connection pools that hand out the connection returned last (LIFO), not the oldest.

`use_lifo(pool)` switches the pool eventsourcing's datastore built (LedgerFactory calls it);
`LifoReadPool` is psycopg_pool's ConnectionPool, LIFO, for the API's reads. Why, and what it
measured: docs/ledger.md.
"""

from __future__ import annotations

from typing import Any

import psycopg_pool
from eventsourcing.postgres import ConnectionPool
from psycopg_pool import PoolTimeout, TooManyRequests

__all__ = ["LifoConnectionPool", "LifoReadPool", "use_lifo"]


def _get_ready_lifo(self: Any, timeout: float | None) -> Any:
    # psycopg_pool's own `_get_ready_connection` (3.2, 3.3) with pop() instead of popleft();
    # it runs with the pool's lock held. tests/domain/ledger/test_ledger_pool.py checks it.
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
