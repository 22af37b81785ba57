"""A private Citus cluster on loopback: a coordinator and workers, each its own PostgreSQL 15.

Like tests/faults/cluster.py: fresh temporary folders, free ports, `runuser postgres` when this
runs as root. Each node preloads citus and runs with `wal_level = logical` (shard moves by
logical replication, `citus_rebalance_start`). `CitusCluster.start()` makes the coordinator
know itself and its workers; `add_worker()` starts one more node and adds it, as an operator
adding capacity would.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.faults.cluster import BIN, PrivateCluster

__all__ = ["BIN", "CitusCluster", "citus_installed"]

_CONF = (
    "shared_preload_libraries = 'citus'\n"
    "wal_level = logical\n"
    "max_replication_slots = 20\n"
    "max_wal_senders = 20\n"
    "max_worker_processes = 40\n"
    "citus.shard_count = 8\n"
)


def citus_installed() -> bool:
    """Whether this machine's PostgreSQL 15 has the citus extension (../shared/citus/build.sh)."""
    share = BIN.parent.parent.parent.parent / "share" / "postgresql" / "15" / "extension"
    lib = BIN.parent / "lib" / "citus.so"
    return lib.exists() and (share / "citus.control").exists()


class CitusCluster:
    """A coordinator and `workers` worker nodes; `url` is the coordinator's (database postgres)."""

    def __init__(self, ports: list[int]) -> None:
        self.nodes: list[PrivateCluster] = []
        self._ports = list(ports)
        for port in ports:
            self.nodes.append(self._make(port))

    @staticmethod
    def _make(port: int) -> PrivateCluster:
        node = PrivateCluster(port)
        with (node.data / "postgresql.conf").open("a") as conf:
            conf.write(_CONF)
        return node

    @property
    def coordinator(self) -> PrivateCluster:
        return self.nodes[0]

    @property
    def url(self) -> str:
        return self.coordinator.url

    def start(self) -> None:
        """Start every node, create the extension on each, register the workers."""
        for node in self.nodes:
            node.start()
            _sql(node.url, "CREATE EXTENSION IF NOT EXISTS citus")
        _sql(self.url, "SELECT citus_set_coordinator_host('127.0.0.1', %s)", self.coordinator.port)
        for node in self.nodes[1:]:
            _sql(self.url, "SELECT citus_add_node('127.0.0.1', %s)", node.port)

    def add_worker(self, port: int) -> PrivateCluster:
        """Start a new node and add it to the cluster (it holds no shards until a rebalance)."""
        node = self._make(port)
        self.nodes.append(node)
        node.start()
        _sql(node.url, "CREATE EXTENSION IF NOT EXISTS citus")
        _sql(self.url, "SELECT citus_add_node('127.0.0.1', %s)", port)
        return node

    def data_folders(self) -> list[Path]:
        """Every node's data folder (the raw-page scans read them all)."""
        return [node.data for node in self.nodes]

    def remove(self) -> None:
        for node in self.nodes:
            node.remove()


def _sql(url: str, statement: str, *args: object) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, args or None)  # type: ignore[arg-type]
