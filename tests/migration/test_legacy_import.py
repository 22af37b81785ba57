"""Legacy import of a generated 10,000-row file on PostgreSQL: counts, report, re-runs, kills."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.ledger.sealing import _aad
from domain.model.memory import Memory
from domain.model.values import Scope, normalise_content
from migration.migrate import LegacyRun, migrate_legacy
from projections.tracking import Tables
from projections.views._memory_rows import open_memory_rows
from projections.worker import ProjectionWorker
from tests.migration.synthetic import Expected, write_legacy_file

pytestmark = pytest.mark.integration

USERS, ROWS_PER_USER, UNMAPPED = 500, 20, 10
EVENTS = "memledger_events"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Expected:
    """10,000 rows over 500 users (10 of them unmapped), written once for the module."""
    expected = write_legacy_file(
        tmp_path_factory.mktemp("legacy"),
        users=USERS,
        rows_per_user=ROWS_PER_USER,
        unmapped=UNMAPPED,
    )
    assert expected.rows == 10_000
    return expected


@pytest.fixture
def legacy(generated: Expected, tmp_path: Path) -> Expected:
    """A copy of the generated file in this test's folder (backups and reports land there)."""
    shutil.copy(generated.path, tmp_path / generated.path.name)
    shutil.copy(generated.users_csv, tmp_path / generated.users_csv.name)
    return Expected(
        tmp_path / generated.path.name,
        tmp_path / generated.users_csv.name,
        generated.user_ids,
        generated.rows,
        generated.per_user,
        generated.memories,
        generated.secret_row_ids,
    )


def run(ledger: MemoryLedger, legacy: Expected, **options: Any) -> tuple[LegacyRun, str]:
    out = io.StringIO()
    result = migrate_legacy(
        ledger, legacy.path, legacy.users_csv, out=out, log=io.StringIO(), workers=8, **options
    )
    return result, out.getvalue()


def ledger_rows(worker: ProjectionWorker, schema: str) -> list[dict[str, Any]]:
    """Every live memory of the schema, from the active_memories projection (opened)."""
    worker.catch_up()
    tables = Tables(schema)
    with worker.pool.connection() as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(
            sql.SQL(
                "SELECT memory_id, user_id, memory_key, content, category, scope_type,"
                " workspace_type, status, revision FROM {}"
            ).format(tables["active_memories"])
        )
        return open_memory_rows(cur.fetchall(), "active_memories", tables.seal)


def assert_counts_as_expected(result: LegacyRun, legacy: Expected, *, rerun: bool) -> None:
    """Per user: the planted outcomes, exactly; the ledger holds what was imported."""
    assert len(result.result.users) == USERS
    for user in result.result.users:
        expected = legacy.per_user[user.user_name]
        imported = expected["imported"]
        assert user.legacy_rows == ROWS_PER_USER
        assert dict(user.skipped) == {k: v for k, v in expected.items() if k != "imported"}
        assert (user.imported, user.unchanged) == ((0, imported) if rerun else (imported, 0))
        if user.user_id is None:
            assert user.user_name not in legacy.user_ids and user.ledger is None
        else:
            assert (user.ledger_before, user.ledger) == ((imported if rerun else 0), imported)
        assert user.problems() == []
    assert result.result.adds_up and result.exit_code == 0


def assert_ledger_holds_exactly(rows: list[dict[str, Any]], legacy: Expected) -> None:
    """One global memory per expected (user, key), with its content and category: no more."""
    found = {
        (r["user_id"], r["memory_key"]): (normalise_content(r["content"]), r["category"])
        for r in rows
    }
    assert len(found) == len(rows)  # no duplicates
    assert found == {k: (normalise_content(c), cat) for k, (c, cat) in legacy.memories.items()}
    assert {(r["scope_type"], r["workspace_type"], r["status"], r["revision"]) for r in rows} == {
        ("global", None, "active", 1)
    }


@pytest.mark.slow  # ~13 s
def test_importing_10000_rows_gives_exact_counts_a_report_and_an_idempotent_rerun(
    ledger: MemoryLedger, worker: ProjectionWorker, pg_schema: str, legacy: Expected
) -> None:
    dry, dry_out = run(ledger, legacy, dry_run=True)
    assert ledger.recorded() == 0 and not list(legacy.path.parent.glob("*.backup-*"))
    assert_counts_as_expected(dry, legacy, rerun=False)

    first, first_out = run(ledger, legacy)
    assert_counts_as_expected(first, legacy, rerun=False)
    totals = first.result.totals()
    assert (
        totals["imported"]
        == len(legacy.memories)
        == sum(c["imported"] for c in legacy.per_user.values())
    )
    assert totals["legacy_rows"] == 10_000
    assert first.result.skipped_by_reason() == legacy.totals() - Counter(
        imported=totals["imported"]
    )
    # The dry run printed the same per-user table and totals as the real run.
    assert table(dry_out) == table(first_out)

    # The backup: beside the file, made before the import, with a checksum that verifies.
    backup = first.info.backup
    assert backup is not None and backup.path.parent == legacy.path.parent
    assert hashlib.sha256(backup.path.read_bytes()).hexdigest() == backup.sha256
    assert backup.checksum_path.read_text() == f"{backup.sha256}  {backup.path.name}\n"
    assert str(backup.path) in first_out and str(first.report) in first_out
    assert same_rows(backup.path, legacy.path)

    assert_report(first.report, legacy, first)
    rows = ledger_rows(worker, pg_schema)
    assert_ledger_holds_exactly(rows, legacy)
    assert_migrated_memories_keep_their_origin(ledger, rows, legacy)

    position = ledger.recorded()
    again, _ = run(ledger, legacy)
    assert_counts_as_expected(again, legacy, rerun=True)
    assert ledger.recorded() == position  # nothing at all was written
    assert_ledger_holds_exactly(ledger_rows(worker, pg_schema), legacy)


def table(output: str) -> list[str]:
    """The per-user lines and totals of a printed summary."""
    return [line for line in output.splitlines() if line.startswith(("user", "TOTAL", "skipped"))]


def same_rows(a: Path, b: Path) -> bool:
    query = "SELECT * FROM core_memories ORDER BY id"
    with sqlite3.connect(a) as left, sqlite3.connect(b) as right:
        return left.execute(query).fetchall() == right.execute(query).fetchall()


def assert_report(path: Path, legacy: Expected, result: LegacyRun) -> None:
    """Every skipped row with its reason; users and totals; never a secret's text."""
    text = path.read_text()
    assert "Tr0ub4dor" not in text and "AbCdEfGh" not in text and "x" * 1200 not in text
    lines = [json.loads(line) for line in text.splitlines()]
    kinds = Counter(line["type"] for line in lines)
    skipped_total = sum(sum(c.values()) - c["imported"] for c in legacy.per_user.values())
    assert kinds == {"run": 1, "skipped": skipped_total, "user": USERS, "summary": 1}
    assert lines[0]["backup_sha256"] == result.info.backup.sha256  # type: ignore[union-attr]
    skipped = [line for line in lines if line["type"] == "skipped"]
    by_user: dict[str, Counter[str]] = {}
    for line in skipped:
        by_user.setdefault(line["user_name"], Counter())[line["reason"]] += 1
        assert set(line) == {
            "type",
            "legacy_id",
            "user_name",
            "user_id",
            "memory_key",
            "reason",
            "detail",
        }
    for name, counts in legacy.per_user.items():
        assert by_user.get(name, Counter()) == counts - Counter(imported=counts["imported"])
    secrets = [line for line in skipped if line["reason"] == "secret"]
    assert {line["legacy_id"] for line in secrets} == legacy.secret_row_ids
    for line in secrets:  # a key holding a secret is never shown; a content one shows its key
        field, kind = line["detail"].split(": ")
        assert (field, line["memory_key"] is None) in {("content", False), ("memory_key", True)}
        assert kind in {"password", "api_key"}
    summary = lines[-1]
    assert summary["adds_up"] and summary["users_not_adding_up"] == 0
    assert summary["imported"] == len(legacy.memories) and summary["ledger"] == summary["imported"]


def assert_migrated_memories_keep_their_origin(
    ledger: MemoryLedger, rows: list[dict[str, Any]], legacy: Expected
) -> None:
    """changed_via = migration, original times as data; `project` stays a global project."""
    with sqlite3.connect(legacy.path) as conn:
        by_id = {
            r[0]: r for r in conn.execute("SELECT id, created_at, updated_at FROM core_memories")
        }
    projects = [r for r in rows if r["memory_key"] == "current_project"]
    assert len(projects) == USERS - UNMAPPED
    assert {(r["category"], r["scope_type"]) for r in projects} == {("project", "global")}
    for row in rows[:: len(rows) // 50]:
        memory = ledger.repository.get(row["memory_id"])
        assert isinstance(memory, Memory)
        assert memory.versions[0].changed_via == "migration" and memory.source_type == "explicit"
        origin = memory.origin
        assert origin is not None and origin["system"] == "legacy-coremem"
        _, created, updated = by_id[int(origin["legacy_id"])]
        assert parse(origin["created_at"]) == parse(created)
        assert parse(origin["updated_at"]) == parse(updated)


def parse(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


# -- killed and resumed ----------------------------------------------------------------------


def cli_env(database_url: str, schema: str, master_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLEDGER_")}
    return {
        **env,
        "MEMLEDGER_DATABASE_URL": database_url,
        "MEMLEDGER_SCHEMA": schema,
        "MEMLEDGER_MASTER_KEY": master_key,
    }


def count_events(database_url: str, schema: str) -> int:
    """Events in the ledger of this schema (each import writes one per memory)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, EVENTS))
        ).fetchone()
        return int(row[0]) if row else 0


@pytest.mark.slow  # ~10 s
def test_an_import_killed_mid_run_resumes_to_the_state_of_an_uninterrupted_one(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    database_url: str,
    pg_schema: str,
    master_key: str,
    legacy: Expected,
) -> None:
    memledger = str(Path(sys.executable).parent / "memledger")
    args = [memledger, "migrate", "legacy", "--sqlite", str(legacy.path)]
    args += ["--users", str(legacy.users_csv), "--workers", "8"]
    env = cli_env(database_url, pg_schema, master_key)
    killed = subprocess.Popen(
        args, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while count_events(database_url, pg_schema) < 2_000:
            assert killed.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        killed.send_signal(signal.SIGKILL)
    finally:
        killed.kill()
        killed.wait()
    assert killed.returncode == -signal.SIGKILL
    # A COMMIT the killed client sent just before dying may still be applied by the server:
    # wait until the count stands still before taking it as what the killed run wrote.
    written, settled = -1, count_events(database_url, pg_schema)
    while written != settled:
        time.sleep(0.5)
        written, settled = settled, count_events(database_url, pg_schema)
    assert 2_000 <= written < len(legacy.memories)

    report = legacy.path.parent / "resumed.jsonl"
    resumed = subprocess.run(
        [*args, "--report", str(report)], env=env, cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert "all counts add up" in resumed.stdout
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    users = {line["user_name"]: line for line in lines if line["type"] == "user"}
    assert len(users) == USERS
    unchanged = 0
    for name, counts in legacy.per_user.items():
        user = users[name]
        assert user["adds_up"] and user["legacy_rows"] == ROWS_PER_USER
        assert user["imported"] + user["unchanged"] == counts["imported"]
        assert user["skipped"] == {k: v for k, v in counts.items() if k != "imported"}
        if name in legacy.user_ids:
            assert user["ledger"] == counts["imported"]
        unchanged += user["unchanged"]
    assert unchanged == written  # what the killed run committed, and nothing else, was there
    assert lines[-1]["imported"] + lines[-1]["unchanged"] == len(legacy.memories)

    # The same state an uninterrupted run reaches (see the test above): every expected memory
    # once, and one creation event each - nothing half-done or repeated.
    assert_ledger_holds_exactly(ledger_rows(worker, pg_schema), legacy)
    assert count_events(database_url, pg_schema) == len(legacy.memories)


# -- events written before `origin` existed ---------------------------------------------------


def test_memories_created_before_origin_existed_still_load(
    make_ledger: Any, ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    view = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="drink", content="Tea.", category="preference"
    ).memory
    assert view is not None
    table_name = sql.Identifier(pg_schema, ledger.recorder.events_table_name)
    with psycopg.connect(database_url, autocommit=True) as conn:
        topic, state = conn.execute(
            sql.SQL("SELECT topic, state FROM {} WHERE originator_id = %s").format(table_name),
            (view.memory_id,),
        ).fetchone()
        stored = StoredEvent(view.memory_id, 1, topic, bytes(state))
        decoded = ledger.mapper.decode_state(stored, Memory.Created.PERSONAL)
        assert decoded["class_version"] == 2 and decoded["origin"] is None
        # Rewrite it the way version 1 of the event was stored: no class_version, no origin.
        secret = {name: decoded.pop(name) for name in Memory.Created.PERSONAL}
        del decoded["class_version"], decoded["origin"]
        transcoder = ledger.mapper.transcoder
        clear = transcoder.encode(decoded)
        nonce = os.urandom(12)
        key = ledger.keys.get(view.memory_id)
        assert key is not None
        sealed = AESGCM(key).encrypt(
            nonce, transcoder.encode(secret), _aad(view.memory_id, 1, topic, clear)
        )
        v1 = b"MLS1" + len(clear).to_bytes(4, "big") + clear + nonce + sealed
        conn.execute(
            sql.SQL("UPDATE {} SET state = %s WHERE originator_id = %s").format(table_name),
            (v1, view.memory_id),
        )
    fresh = make_ledger()
    memory = fresh.repository.get(view.memory_id)
    assert isinstance(memory, Memory)
    assert (memory.content, memory.memory_key, memory.origin) == ("Tea.", "drink", None)
    assert fresh.get_memory("alice", view.memory_id).content == "Tea."
