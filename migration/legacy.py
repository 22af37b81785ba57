"""The legacy CoreMemory SQLite file: its exact shape, a verified backup, and reading its rows.

Accepted shape (section 19; `backend/agent/memories/core_memory.py`): one table
`core_memories` whose columns are exactly

    id          INTEGER PRIMARY KEY   optional (the SQLite rowid is used when it is absent)
    user_name   TEXT NOT NULL
    memory_key  TEXT NOT NULL
    content     TEXT NOT NULL
    category    TEXT NOT NULL         'general' by default
    created_at  TEXT NOT NULL         ISO 8601, with or without an offset
    updated_at  TEXT NOT NULL

with at most one row per (user_name, memory_key). Other tables (`sqlite_sequence`, indexes) are
ignored. A missing table, a missing or extra column, or a repeated (user_name, memory_key) stops
the run before anything is written: the file is then not what this tool understands.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.request import pathname2url

__all__ = [
    "LEGACY_TABLE",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "Backup",
    "LegacyFormatError",
    "LegacyRow",
    "make_backup",
    "read_legacy",
]

LEGACY_TABLE: Final = "core_memories"
REQUIRED_COLUMNS: Final = (
    "user_name",
    "memory_key",
    "content",
    "category",
    "created_at",
    "updated_at",
)
OPTIONAL_COLUMNS: Final = ("id",)


class LegacyFormatError(Exception):
    """The file is not a legacy CoreMemory database this tool understands."""


@dataclass(frozen=True, slots=True)
class LegacyRow:
    """One row as stored (values unchecked: SQLite does not enforce column types)."""

    legacy_id: int
    user_name: Any
    memory_key: Any
    content: Any
    category: Any
    created_at: Any
    updated_at: Any


@dataclass(frozen=True, slots=True)
class Backup:
    """A consistent copy of the legacy file and the SHA-256 of that copy."""

    path: Path
    sha256: str
    checksum_path: Path


def _connect_read_only(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise LegacyFormatError(f"{path}: no such file")
    try:
        conn = sqlite3.connect(f"file:{pathname2url(str(path.resolve()))}?mode=ro", uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        raise LegacyFormatError(f"{path}: not an SQLite database ({error})") from None
    return conn


def _check_shape(conn: sqlite3.Connection, path: Path) -> bool:
    """Raise LegacyFormatError unless the table is the legacy one; True when it has `id`."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEGACY_TABLE,)
    ).fetchone()
    if found is None:
        raise LegacyFormatError(f"{path}: no table {LEGACY_TABLE!r}; is this a CoreMemory file?")
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({LEGACY_TABLE})")]
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    extra = [c for c in columns if c not in REQUIRED_COLUMNS and c not in OPTIONAL_COLUMNS]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        if extra:
            problems.append(f"unknown column(s) {', '.join(extra)}")
        expected = ", ".join([*OPTIONAL_COLUMNS, *REQUIRED_COLUMNS])
        raise LegacyFormatError(
            f"{path}: table {LEGACY_TABLE} has {'; '.join(problems)}; expected exactly {expected}"
        )
    repeated = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {LEGACY_TABLE}"
        " GROUP BY user_name, memory_key HAVING count(*) > 1)"
    ).fetchone()[0]
    if repeated:
        raise LegacyFormatError(
            f"{path}: {repeated} (user_name, memory_key) pairs occur more than once; the legacy"
            " table is unique on them"
        )
    return "id" in columns


def read_legacy(path: Path) -> list[LegacyRow]:
    """Every row of the legacy table in id order, after checking the file's shape."""
    conn = _connect_read_only(path)
    try:
        has_id = _check_shape(conn, path)
        ident = "id" if has_id else "rowid"
        cursor = conn.execute(
            f"SELECT {ident}, {', '.join(REQUIRED_COLUMNS)} FROM {LEGACY_TABLE} ORDER BY {ident}"
        )
        return [LegacyRow(*row) for row in cursor]
    except sqlite3.DatabaseError as error:
        raise LegacyFormatError(f"{path}: cannot be read ({error})") from None
    finally:
        conn.close()


def make_backup(path: Path, *, now: datetime | None = None) -> Backup:
    """Copy the file beside itself (SQLite's online backup: consistent even while in use).

    Writes `<file>.backup-<UTC time>` and `<file>.backup-<UTC time>.sha256` (the format of
    `sha256sum`, so `sha256sum -c` verifies it). Refuses to overwrite an existing backup.
    """
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.backup-{stamp}")
    if target.exists():
        raise FileExistsError(f"{target} exists already")
    source = _connect_read_only(path)
    try:
        _check_shape(source, path)
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
    except sqlite3.Error as error:
        raise OSError(f"cannot write the backup {target}: {error}") from None
    finally:
        source.close()
    digest = _sha256(target)
    checksum = target.with_name(target.name + ".sha256")
    checksum.write_text(f"{digest}  {target.name}\n")
    return Backup(target, digest, checksum)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
