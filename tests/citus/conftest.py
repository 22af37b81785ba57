"""Fixtures of the Citus suite: a 3-node loopback cluster, and every test's schema on it,
distributed by `memledger cluster distribute` before the test writes anything.

`database_url` and `pg_schema` are overridden here, so the suite's own fixtures (`ledger`,
`worker`, `services`, `client`, e2e `server`) build on the cluster's coordinator: the test
modules of this folder run the project's existing tests, unchanged, against Citus.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.embedded import ensure_schema
from tests.citus.cluster import CitusCluster, citus_installed
from tests.conftest import command_env
from tests.e2e.test_server_e2e import free_port
from tests.faults.cluster import BIN
from tests.schemas import drop_schema

REASON = (
    "Citus is not installed in this machine's PostgreSQL 15 (../shared/citus/build.sh builds"
    " it; .ci/run does)"
)


@pytest.fixture(scope="session")
def cluster() -> Iterator[CitusCluster]:
    """A coordinator and two workers of this session's own, removed afterwards."""
    if not (BIN / "initdb").exists() or not citus_installed():
        pytest.skip(REASON)
    made = CitusCluster([free_port() for _ in range(3)])
    try:
        made.start()
        yield made
    finally:
        made.remove()


@pytest.fixture(scope="session")
def database_url(cluster: CitusCluster) -> str:
    return cluster.url


@pytest.fixture
def pg_schema(database_url: str, master_key: str) -> Iterator[str]:
    """A schema of this test's own, its tables made and distributed by the operator's command.

    16 partitions in 4 shards a table (two a worker; a third worker added takes one): every
    shard holds several partitions, as in production, and each test's distribution takes
    1.5 s instead of the 2.1 s of a shard per partition."""
    name = f"c_{uuid.uuid4().hex[:12]}"
    ensure_schema(database_url, name)
    env = command_env(database_url, name, master_key) | {"MEMLEDGER_PARTITIONS": "16"}
    result = CliRunner().invoke(app, ["cluster", "distribute", "--shards", "4"], env=env)
    assert result.exit_code == 0, result.output
    try:
        yield name
    finally:
        drop_schema(database_url, name)
