"""`memledger migrate partitions`: the upgrade from the release before partitions, alone, saying
what it did; run again, it does nothing (tests/projections/test_upgrade.py checks the result)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from typer.testing import CliRunner

from api.cli import app as cli
from domain.ledger.ledger import MemoryLedger
from projections.registry import main_projections
from projections.tracking import Tables
from projections.upgrade import EVENTS
from projections.worker import ProjectionWorker
from tests.projections.test_projection_batches import busy_ledger
from tests.projections.test_upgrade import _as_released_before


def test_the_command_partitions_an_old_ledger_once(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    env: dict[str, Any],
    database_url: str,
    pg_schema: str,
    clock: Any,
) -> None:
    busy_ledger(ledger, clock)
    make_worker(main_projections()).catch_up()
    ledger.close()
    t = Tables(pg_schema)
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*), count(*) FROM {}").format(t[EVENTS])  # ids in order
        )
        count, applied = row.fetchone()  # type: ignore[misc]
        _as_released_before(conn, t, applied)
        # An event of no aggregate this ledger knows (it names no user): partition 0.
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (originator_id, originator_version, topic, state)"
                " VALUES (gen_random_uuid(), 1, 'memledger:Future.Event', '{{}}')"
            ).format(t[EVENTS])
        )

    first = CliRunner().invoke(cli, ["migrate", "partitions"], env=env)
    assert first.exit_code == 0, first.output
    assert f"{count + 1} events placed in their users' partitions" in first.output
    with psycopg.connect(database_url, autocommit=True) as conn:
        future = conn.execute(
            sql.SQL("SELECT partition FROM {} WHERE topic = 'memledger:Future.Event'").format(
                t[EVENTS]
            )
        ).fetchall()
    assert future == [(0,)]
    assert "rows of: active_memories, audit_log, profile, search_terms" in first.output

    again = CliRunner().invoke(cli, ["migrate", "partitions"], env=env)
    assert again.exit_code == 0, again.output
    assert "no event without a partition: the ledger is partitioned" in again.output
    assert "positions translated" not in again.output
