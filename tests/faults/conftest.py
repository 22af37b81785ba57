"""Fixtures of the fault suite: a private PostgreSQL cluster and servers over it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from api.embedded import ensure_schema
from tests.e2e.test_server_e2e import free_port
from tests.faults.cluster import BIN, PrivateCluster
from tests.faults.harness import FaultServer, server_env


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A PostgreSQL 15 of this module's own, stopped and removed afterwards whatever happened."""
    if not (BIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL 15 binaries in {BIN}")
    made = PrivateCluster(free_port())
    try:
        made.start()
        yield made
    finally:
        made.remove()


@pytest.fixture
def fault_schema(cluster: PrivateCluster) -> str:
    """A fresh schema in the private cluster (the cluster goes away with everything in it)."""
    name = f"f_{uuid.uuid4().hex[:12]}"
    ensure_schema(cluster.url, name)
    return name


@pytest.fixture
def make_server(
    cluster: PrivateCluster, fault_schema: str, master_key: str, tmp_path: Path
) -> Iterator[Callable[..., FaultServer]]:
    """Build processes over the private cluster (`serve` by default), killed afterwards."""
    made: list[FaultServer] = []

    def make(*command: str) -> FaultServer:
        name = command[0] if command else "serve"
        env = server_env(cluster.url, fault_schema, master_key, tmp_path / "data")
        server = FaultServer(
            env, free_port(), tmp_path / f"{name}-{len(made)}.log", list(command) or ["serve"]
        )
        made.append(server)
        return server

    yield make
    for server in made:
        server.kill()
