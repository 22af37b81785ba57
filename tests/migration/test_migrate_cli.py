"""`memledger migrate legacy` through the command line: input checks, outcomes, exit statuses."""

from __future__ import annotations

import io
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from api.cli import app
from domain.ledger.ledger import MemoryLedger
from domain.model.memory import Memory
from domain.model.values import Scope
from migration.importer import UserTally
from migration.migrate import migrate_legacy
from migration.progress import RowProgress
from tests.migration.synthetic import LEGACY_DDL

pytestmark = pytest.mark.integration

T1, T2 = "2024-05-01T08:00:00", "2024-06-01T08:00:00+00:00"
Row = tuple[str, str, str, str]  # user_name, memory_key, content, category


def legacy_file(folder: Path, rows: list[Row], ddl: str = LEGACY_DDL) -> Path:
    path = folder / "core_memory.db"
    with sqlite3.connect(path) as conn:
        conn.execute(ddl)
        for index, (user, key, content, category) in enumerate(rows):
            conn.execute(
                "INSERT INTO core_memories (user_name, memory_key, content, category,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (user, key, content, category, T1, T2 if index % 2 else T1),
            )
    conn.close()
    return path


def users_file(folder: Path, mapping: dict[str, str], kind: str = "json") -> Path:
    path = folder / f"users.{kind}"
    if kind == "json":
        path.write_text(json.dumps(mapping))
    else:
        path.write_text("user_name,user_id\n" + "".join(f"{k},{v}\n" for k, v in mapping.items()))
    return path


def migrate(env: dict[str, str | None], sqlite: Path, users: Path, *args: str) -> Any:
    argv = ["migrate", "legacy", "--sqlite", str(sqlite), "--users", str(users), *args]
    return CliRunner().invoke(app, argv, env=env)


def report_of(result: Any) -> list[dict[str, Any]]:
    path = next(line for line in result.stdout.splitlines() if line.startswith("report: "))[8:]
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def memories(ledger: MemoryLedger, user_id: str) -> dict[str, tuple[str, str, str]]:
    found = {}
    for memory_id in ledger.memory_ids(user_id):
        view = ledger.get_memory(user_id, memory_id)
        found[view.memory_key] = (view.content, view.category, view.scope_type)
    return found


BASIC: list[Row] = [
    ("ann", "Reply Language", "Reply in Chinese.", "general"),
    ("ann", "thesis", "Writing a thesis on retrieval.", "project"),
    ("ann", "hobby", "Plays go.", "misc"),
    ("ben", "reply_language", "Reply in Chinese.", "preference"),
    ("ben", "password_hint", "My password is Hunter2-abc", "fact"),
    ("zoe", "drink", "Tea.", "preference"),
]


def test_rows_become_global_memories_of_their_mapped_users(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    sqlite = legacy_file(tmp_path, BASIC)
    result = migrate(env, sqlite, users_file(tmp_path, {"ann": "u-ann", "ben": "u-ben"}, "csv"))
    assert result.exit_code == 0, result.output
    assert "all counts add up" in result.stdout
    assert memories(ledger, "u-ann") == {
        "reply_language": ("Reply in Chinese.", "other", "global"),  # legacy general -> other
        "thesis": ("Writing a thesis on retrieval.", "project", "global"),  # stays global
    }
    assert memories(ledger, "u-ben") == {
        "reply_language": ("Reply in Chinese.", "preference", "global")
    }
    lines = report_of(result)
    skipped = {(line["user_name"], line["reason"]) for line in lines if line["type"] == "skipped"}
    assert skipped == {("ann", "unknown_category"), ("ben", "secret"), ("zoe", "unmapped_user")}
    assert "Hunter2" not in json.dumps(lines) and "Hunter2" not in result.output
    users = {line["user_name"]: line for line in lines if line["type"] == "user"}
    assert users["zoe"]["user_id"] is None and users["zoe"]["skipped"] == {"unmapped_user": 1}
    assert (users["ann"]["imported"], users["ann"]["ledger"]) == (2, 2)
    for memory_id in ledger.memory_ids("u-ann"):
        memory = ledger.repository.get(memory_id)
        assert isinstance(memory, Memory) and memory.versions[0].changed_via == "migration"
        assert memory.origin is not None and memory.origin["system"] == "legacy-coremem"


def test_a_legacy_category_can_be_mapped_explicitly(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    sqlite = legacy_file(tmp_path, BASIC[:3])
    users = users_file(tmp_path, {"ann": "u-ann"})
    bad = migrate(env, sqlite, users, "--map-category", "misc=hobbies")
    assert bad.exit_code == 2 and "misc=hobbies" in bad.output
    result = migrate(env, sqlite, users, "--map-category", "MISC=background")
    assert result.exit_code == 0, result.output
    assert memories(ledger, "u-ann")["hobby"] == ("Plays go.", "background", "global")
    (hobby,) = [
        i for i in ledger.memory_ids("u-ann") if ledger.get_memory("u-ann", i).memory_key == "hobby"
    ]
    origin = ledger.repository.get(hobby).origin
    assert origin["legacy_category"] == "misc" and origin["system"] == "legacy-coremem"


def test_naive_legacy_times_are_read_in_the_given_zone(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    sqlite = legacy_file(tmp_path, BASIC[:1])
    users = users_file(tmp_path, {"ann": "u-ann"})
    result = migrate(env, sqlite, users, "--naive-timezone", "Asia/Shanghai")
    assert result.exit_code == 0, result.output
    (memory_id,) = ledger.memory_ids("u-ann")
    origin = ledger.repository.get(memory_id).origin
    assert origin["created_at"] == "2024-05-01T00:00:00Z"  # 08:00 in Shanghai
    assert origin["legacy_id"] == "1"
    unknown = migrate(env, sqlite, users, "--naive-timezone", "Mars/Olympus")
    assert unknown.exit_code == 2


def test_a_key_that_holds_other_content_is_a_conflict_and_is_never_overwritten(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    ledger.create_memory(
        "u-ann", scope=Scope.global_(), memory_key="thesis", content="Other.", category="fact"
    )
    sqlite = legacy_file(tmp_path, BASIC[:2])
    result = migrate(env, sqlite, users_file(tmp_path, {"ann": "u-ann"}))
    assert result.exit_code == 0, result.output  # everything is accounted for
    assert memories(ledger, "u-ann")["thesis"] == ("Other.", "fact", "global")
    lines = report_of(result)
    (conflict,) = [line for line in lines if line["type"] == "skipped"]
    assert (conflict["memory_key"], conflict["reason"]) == ("thesis", "conflict")
    (user,) = [line for line in lines if line["type"] == "user"]
    assert (user["ledger_before"], user["imported"], user["ledger"]) == (1, 1, 2)


def test_keys_that_normalise_alike_keep_the_row_updated_last(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    rows: list[Row] = [
        ("ann", "Favourite Food", "Dumplings.", "preference"),  # updated T1
        ("ann", "favourite-food", "Noodles.", "preference"),  # updated T2, later
    ]
    result = migrate(env, legacy_file(tmp_path, rows), users_file(tmp_path, {"ann": "u-ann"}))
    assert result.exit_code == 0, result.output
    assert memories(ledger, "u-ann") == {"favourite_food": ("Noodles.", "preference", "global")}
    (line,) = [line for line in report_of(result) if line["type"] == "skipped"]
    assert (line["memory_key"], line["reason"]) == ("Favourite Food", "key_collision")


def test_a_dry_run_writes_nothing_but_reports_the_same(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger
) -> None:
    sqlite = legacy_file(tmp_path, BASIC)
    users = users_file(tmp_path, {"ann": "u-ann", "ben": "u-ben"})
    dry = migrate(env, sqlite, users, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("DRY RUN")
    assert ledger.recorded() == 0 and not list(tmp_path.glob("*.backup-*"))
    assert report_of(dry)[0]["dry_run"] is True
    real = migrate(env, sqlite, users)
    assert real.exit_code == 0
    assert table(dry.stdout) == table(real.stdout)
    backups = list(tmp_path.glob("*.backup-*"))
    assert len(backups) == 2 and f"backup: {sorted(backups)[0]}" in real.stdout


def table(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.split(" ")[0] in {"ann", "ben", "zoe"}]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("CREATE TABLE memories (id INTEGER PRIMARY KEY, x TEXT)", "no table 'core_memories'"),
        (
            LEGACY_DDL.replace(
                "updated_at TEXT NOT NULL,", "updated_at TEXT NOT NULL, scope TEXT,"
            ),
            "unknown column(s) scope",
        ),
        (
            "CREATE TABLE core_memories (user_name TEXT, memory_key TEXT, content TEXT,"
            " category TEXT, created_at TEXT)",
            "missing column(s) updated_at",
        ),
        (
            "CREATE TABLE core_memories (user_name TEXT, memory_key TEXT, content TEXT,"
            " category TEXT, created_at TEXT, updated_at TEXT)",
            "occur more than once",
        ),
    ],
)
def test_a_file_of_another_shape_stops_the_run_before_anything_is_written(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger, ddl: str, message: str
) -> None:
    sqlite = tmp_path / "core_memory.db"
    with sqlite3.connect(sqlite) as conn:
        conn.execute(ddl)
        if ddl.startswith("CREATE TABLE memories"):
            conn.execute("INSERT INTO memories (x) VALUES ('a')")
        elif "updated_at TEXT)" in ddl:
            for _ in range(2):
                conn.execute(
                    "INSERT INTO core_memories VALUES ('ann', 'k', 'c', 'fact', ?, ?)", (T1, T1)
                )
    conn.close()
    result = migrate(env, sqlite, users_file(tmp_path, {"ann": "u-ann"}))
    assert result.exit_code == 2
    assert message in result.output
    assert {p.name for p in tmp_path.iterdir()} == {"core_memory.db", "users.json"}
    assert ledger.recorded() == 0


def test_a_missing_or_non_sqlite_file_is_refused(
    tmp_path: Path, env: dict[str, str | None]
) -> None:
    users = users_file(tmp_path, {"ann": "u-ann"})
    missing = migrate(env, tmp_path / "nope.db", users)
    assert missing.exit_code == 2 and "no such file" in missing.output
    garbage = tmp_path / "garbage.db"
    garbage.write_text("not a database " * 100)
    refused = migrate(env, garbage, users)
    assert refused.exit_code == 2 and "not an SQLite database" in refused.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"ann": "u-1", "ben": "u-1"}', "one-to-one"),
        ('{"ann": ""}', "user_id must have"),
        ('["ann"]', "expected a JSON object"),
        ("{}", "maps no user"),
        ("name,id\nann,u-1\n", "user_name,user_id"),
    ],
)
def test_a_user_map_that_could_guess_is_refused(
    tmp_path: Path, env: dict[str, str | None], ledger: MemoryLedger, content: str, message: str
) -> None:
    users = tmp_path / ("users.csv" if content.startswith("name") else "users.json")
    users.write_text(content)
    result = migrate(env, legacy_file(tmp_path, BASIC), users)
    assert result.exit_code == 2 and message in result.output
    assert ledger.recorded() == 0 and not list(tmp_path.glob("*.backup-*"))


def test_counts_that_do_not_add_up_exit_non_zero(
    tmp_path: Path, ledger: MemoryLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite = legacy_file(tmp_path, BASIC[:2])
    users = users_file(tmp_path, {"ann": "u-ann"})
    # As if a memory vanished from the ledger while the import ran.
    monkeypatch.setattr(ledger, "memory_ids", lambda user_id: [])
    out = io.StringIO()
    run = migrate_legacy(ledger, sqlite, users, out=out, log=io.StringIO())
    assert run.exit_code == 1 and not run.result.adds_up
    assert "COUNTS DO NOT ADD UP for 1 user(s)" in out.getvalue()
    assert "ledger holds 0, expected 0 before + 2 imported" in out.getvalue()


def test_tally_problems_name_what_does_not_add_up() -> None:
    tally = UserTally("ann", "u-ann", legacy_rows=5, imported=2, unchanged=1, ledger_before=0)
    tally.skipped = Counter(secret=1)
    tally.ledger = 3
    assert tally.problems() == [
        "5 legacy rows but 4 accounted for",
        "ledger holds 3, expected 0 before + 2 imported",
    ]


def test_progress_is_a_bar_with_rows_per_second_on_a_terminal_and_log_lines_otherwise() -> None:
    bar = io.StringIO()
    with RowProgress(10, "importing", stream=bar, tty=True) as progress:
        progress.advance(10)
    assert "rows/s" in bar.getvalue() and "10/10" in bar.getvalue()
    log = io.StringIO()
    with RowProgress(10, "importing", stream=log, tty=False, interval=0) as progress:
        for _ in range(3):
            progress.advance()
    lines = log.getvalue().splitlines()
    assert lines[0] == "memledger: importing: 10 rows"
    assert lines[1].startswith("memledger: importing: 1/10 rows (") and "rows/s)" in lines[1]
    assert lines[-1].startswith("memledger: importing: 3/10 rows")


def test_the_cli_lists_the_migration_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert all(name in result.output for name in ("migrate", "export", "import"))
    assert isinstance(app, typer.Typer)
