"""The product end to end on a 3-node Citus cluster (coordinator + 2 workers, tests/citus).

Most tests here are the project's own, imported unchanged: this folder's conftest points
`database_url` at the cluster's coordinator and distributes each test's schema with
`memledger cluster distribute`, so the same assertions hold on distributed tables. Below them,
what only a cluster has: where the shards went, the command's own contract, a rebuild on
distributed tables, and the raw-page scan of a forget on every node.
"""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from api.cli import app
from domain.ledger.ledger import MemoryLedger
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.worker import ProjectionWorker
from tests.api.test_agent_tokens import (  # noqa: F401
    test_agent_turn_tokens_still_reach_the_tools,
    test_every_agent_turn_token_is_refused_on_the_user_apis,
)
from tests.api.test_audit_api import (  # noqa: F401
    test_a_read_recorded_after_its_memory_was_forgotten_stays_in_the_trail,
    test_every_change_is_audited_with_its_request_id_and_no_content,
    test_pages_walk_every_event_once_and_filters_narrow,
)
from tests.api.test_audit_replay_api import (  # noqa: F401
    auditor,
    ledger_story,
    test_as_of_before_anything_and_of_one_memory,
    test_each_filter_keeps_what_the_replay_package_keeps,
    test_forgotten_content_is_redacted_in_both_views,
)
from tests.api.test_candidates_api import (  # noqa: F401
    test_a_candidate_about_a_forgotten_memory_ends_expired_and_shredded,
    test_accept_as_proposed_creates_a_confirmed_memory,
    test_accept_with_edits_to_content_category_and_scope,
    test_reject_shreds_the_proposal,
)
from tests.api.test_memories_api import (  # noqa: F401
    test_another_users_memory_is_404_everywhere,
    test_create_then_read_it_back,
    test_forgotten_is_410_for_the_owner_and_404_for_others,
    test_pagination_walks_every_memory_once,
    test_patch_needs_expected_revision_and_detects_stale_ones,
    test_suppress_and_restore,
    test_versions_and_version_restore,
)
from tests.api.test_settings_api import (  # noqa: F401
    test_the_management_api_keeps_working_with_memory_disabled,
)
from tests.api.test_tools_api import (  # noqa: F401
    agent,
    test_forget_forgets_and_then_the_memory_is_410,
    test_isolated_mode_denies_every_tool,
    test_no_write_mode_denies_writes_before_looking_at_the_memory,
    test_propose_for_a_taken_key_proposes_a_replacement,
    test_save_creates_an_explicit_memory_changed_via_agent_tool,
    test_search_returns_relevant_visible_memories_with_token_counts,
    test_update_makes_a_new_revision_via_agent_tool,
)
from tests.citus.cluster import CitusCluster
from tests.conftest import command_env
from tests.e2e.test_server_e2e import (  # noqa: F401
    server,
    test_a_memory_lifecycle_over_real_http,
    test_the_search_tool_finds_what_was_saved_over_http,
)
from tests.projections.test_at_rest import forms, page_hits
from tests.projections.test_leases import (  # noqa: F401  (advisory locks: on the coordinator)
    test_running_workers_split_the_partitions_and_apply_every_event_once,
)
from tests.projections.test_projections import scenario, snapshot

pytestmark = [pytest.mark.integration, pytest.mark.citus]


def citus_tables(database_url: str, schema: str) -> dict[str, tuple[str, str | None, int]]:
    """table -> (Citus table type, distribution column, colocation id)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT c.relname, t.citus_table_type, t.distribution_column, t.colocation_id"
            " FROM citus_tables t JOIN pg_class c ON c.oid = t.table_name"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    return {name: (kind, column, colocation) for name, kind, column, colocation in rows}


def test_every_table_is_distributed_by_partition_in_one_colocation_group(
    database_url: str, pg_schema: str
) -> None:
    with psycopg.connect(database_url) as conn:
        names = {
            name
            for (name,) in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r'",
                (pg_schema,),
            )
        }
    found = citus_tables(database_url, pg_schema)
    assert set(found) == names  # no table left on the coordinator alone
    distributed = {n: v for n, v in found.items() if v[0] == "distributed"}
    assert "memledger_events" in distributed and "memledger_data_keys" in distributed
    assert {column for _, column, _ in distributed.values()} == {"partition"}
    assert len({colocation for _, _, colocation in distributed.values()}) == 1
    # Every table holding a user's data is distributed (reference tables hold none).
    reference = {n for n, v in found.items() if v[0] == "reference"}
    with psycopg.connect(database_url) as conn:
        for name in reference:
            columns = {
                c
                for (c,) in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = %s AND table_name = %s",
                    (pg_schema, name),
                )
            }
            assert not columns & {"user_id", "memory_id", "originator_id"}, name


def test_distribute_is_idempotent_and_status_shows_each_node(
    database_url: str,
    pg_schema: str,
    master_key: str,
    ledger: MemoryLedger,
    cluster: CitusCluster,
) -> None:
    for i in range(20):
        ledger.create_memory(
            f"user-{i}", scope=_global(), memory_key="k", content=f"fact {i}", category="fact"
        )
    env = command_env(database_url, pg_schema, master_key)
    again = CliRunner().invoke(app, ["cluster", "distribute"], env=env)
    assert again.exit_code == 0, again.output
    assert "already distributed" in again.output and "distributed by partition:" not in again.output
    shown = CliRunner().invoke(app, ["cluster", "status", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    nodes = json.loads(shown.output)["nodes"]
    assert [n["role"] for n in nodes].count("worker") == len(cluster.nodes) - 1
    workers = [n for n in nodes if n["role"] == "worker"]
    assert all(n["shards"] > 0 for n in workers)
    partitions = sorted(p for n in nodes for p in n["partitions"])
    assert partitions == list(range(16))  # every partition on exactly one node
    assert sum(n["events"] for n in nodes) == ledger.recorded()


def test_distribute_refuses_a_server_without_citus(master_key: str) -> None:
    plain = os.environ.get("MEMLEDGER_DATABASE_URL")
    if not plain:
        pytest.skip("needs the plain PostgreSQL of MEMLEDGER_DATABASE_URL")
    env = command_env(plain, "public", master_key)
    refused = CliRunner().invoke(app, ["cluster", "distribute"], env=env)
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines() == [
        "memledger cluster distribute: this PostgreSQL has no citus extension (CREATE EXTENSION"
        " citus on a Citus coordinator; docs/cluster.md)"
    ]


def test_a_rebuild_on_distributed_tables_equals_live(
    ledger: MemoryLedger, worker: ProjectionWorker, database_url: str, pg_schema: str
) -> None:
    for i in range(3):
        scenario(ledger, f"marker {i}", prefix=f"u{i}-")
    worker.catch_up()
    live = snapshot(database_url, pg_schema)
    report = rebuild(ledger, worker.pool, pg_schema, all_projections(), batch_size=7, processes=2)
    assert report.identical, report.differences
    assert report.events == ledger.recorded()
    assert snapshot(database_url, pg_schema) == live
    still = citus_tables(database_url, pg_schema)  # the swapped-in tables are distributed too
    assert {kind for kind, _, _ in still.values()} <= {"distributed", "reference"}
    assert len({c for kind, _, c in still.values() if kind == "distributed"}) == 1


def test_forgotten_content_is_in_no_raw_page_of_any_node(
    ledger: MemoryLedger, worker: ProjectionWorker, cluster: CitusCluster, pg_schema: str
) -> None:
    secrets = [f"zqcitus{i}secret" for i in range(4)]
    made = [
        ledger.create_memory(
            f"user-{i}", scope=_global(), memory_key=f"key{i}", content=text, category="fact"
        ).memory
        for i, text in enumerate(secrets)
    ]
    worker.catch_up()
    for memory, i in zip(made, range(4), strict=True):
        assert memory is not None
        if i % 2:
            ledger.forget_memory(f"user-{i}", memory.memory_id)
        else:
            ledger.erase_user(f"user-{i}")
    worker.catch_up()
    needles = {needle: text for text in secrets for needle in forms(text)}
    hits: list[str] = []
    with psycopg.connect(cluster.url, autocommit=True) as conn:  # Citus creates it on each node
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
    for node in cluster.nodes:
        with psycopg.connect(node.url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (pg_schema,),
            ).fetchall()
            for (name,) in tables:
                conn.execute(f"VACUUM {name}")
            hits += [f"{node.port}: {hit}" for hit in page_hits(conn, [pg_schema], needles)]
    assert hits == [], hits


def _global() -> Any:
    from domain.model.values import Scope

    return Scope.global_()
