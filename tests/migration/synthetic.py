"""A generated legacy CoreMemory file with known defects, for tests and scripts/bench_import.py.

Each user has `rows_per_user` rows. Every user shares a few keys and contents with all the
others (duplicates across users must stay separate memories). Defects are planted one per row
slot, in users chosen by their number, so the expected outcome of every row is known up front:

    slot 1  secret in the content        users n % 5 == 0    -> secret
    slot 2  secret in the key            users n % 7 == 0    -> secret (key never reported)
    slot 3  category `project`           every user          -> imported, global, `project`
    slot 4  key of punctuation only      users n % 6 == 0    -> invalid_key
    slot 5  key of 80 characters         users n % 10 == 0   -> invalid_key
    slot 6  content of 1,200 characters  users n % 8 == 0    -> content_too_long
    slot 7  category `misc`              users n % 9 == 0    -> unknown_category
    slot 8  "Favourite Food" vs slot 9 "favourite_food" (slot 9 updated later)
                                         users n % 11 == 0   -> key_collision for slot 8
    slot 10 created_at "yesterday"       users n % 13 == 0   -> invalid_timestamp
    slot 11 blank content (whitespace)   users n % 17 == 0   -> invalid_content
and the last `unmapped` users are left out of the user map (-> unmapped_user, all rows).
Other rows use category `general` (-> other) or a ledger category, and naive or UTC times.
"""

from __future__ import annotations

import csv
import sqlite3
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

__all__ = ["LEGACY_DDL", "Expected", "write_legacy_file"]

LEGACY_DDL: Final = """
CREATE TABLE IF NOT EXISTS core_memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name TEXT NOT NULL,
    memory_key TEXT NOT NULL,
    content TEXT NOT NULL,
    category TEXT NOT NULL DEFAULT 'general',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE(user_name, memory_key)
)
"""
_SHARED: Final = (
    ("reply_language", "Please reply in Chinese, with English terms in brackets."),
    ("explanation_style", "I prefer examples before definitions."),
)
_CATEGORIES: Final = ("general", "preference", "goal", "background", "fact", "Profile")
_BASE: Final = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)


@dataclass
class Expected:
    """What importing the generated file must give."""

    path: Path
    users_csv: Path
    user_ids: dict[str, str]  # mapped user_name -> user_id
    rows: int = 0
    per_user: dict[str, Counter[str]] = field(default_factory=dict)  # name -> outcome counts
    memories: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    secret_row_ids: set[int] = field(default_factory=set)

    def totals(self) -> Counter[str]:
        """Outcome counts of all users ('imported' or a skip reason)."""
        total: Counter[str] = Counter()
        for counts in self.per_user.values():
            total.update(counts)
        return total


def write_legacy_file(
    directory: Path,
    *,
    users: int = 500,
    rows_per_user: int = 20,
    unmapped: int = 10,
    name: str = "core_memory.db",
) -> Expected:
    """Write `<directory>/<name>` and `<directory>/users.csv`; return what importing gives."""
    if rows_per_user < 12:
        raise ValueError("rows_per_user must be at least 12 (one slot per planted defect)")
    path, users_csv = directory / name, directory / "users.csv"
    names = [f"user{n:04d}" for n in range(users)]
    ids = {user: f"u-{uuid.uuid5(uuid.NAMESPACE_URL, user)}" for user in names[: users - unmapped]}
    expected = Expected(path, users_csv, ids)
    conn = sqlite3.connect(path)
    try:
        conn.execute(LEGACY_DDL)
        for number, user in enumerate(names):
            counts: Counter[str] = Counter()
            for slot in range(rows_per_user):
                key, content, category, created, updated, outcome = _row(number, slot)
                cursor = conn.execute(
                    "INSERT INTO core_memories (user_name, memory_key, content, category,"
                    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (user, key, content, category, created, updated),
                )
                if outcome == "secret" and user in ids:
                    expected.secret_row_ids.add(int(cursor.lastrowid or 0))
                if user not in ids:
                    outcome = "unmapped_user"
                counts[outcome] += 1
                if outcome == "imported":
                    final_key = key.lower().replace(" ", "_")
                    target = "other" if category == "general" else category.lower()
                    expected.memories[(ids[user], final_key)] = (content, target)
            expected.per_user[user] = counts
            expected.rows += rows_per_user
        conn.commit()
    finally:
        conn.close()
    with users_csv.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_name", "user_id"])
        writer.writerows(ids.items())
    return expected


def _row(n: int, slot: int) -> tuple[str, str, str, str, str, str]:
    """key, content, category, created_at, updated_at, expected outcome of user n's row."""
    created = _BASE + timedelta(days=n % 97, minutes=slot)
    updated = created + timedelta(days=slot)
    naive = slot % 2 == 0  # the oldest legacy code wrote naive local times
    times = (_text(created, naive), _text(updated, naive))
    category = _CATEGORIES[(n + slot) % len(_CATEGORIES)]
    plain = (f"note_{slot}", f"User {n} note {slot}: likes topic {slot * 7 % 31}.", category)
    match slot:
        case 0 | 12:
            key, content = _SHARED[slot // 12]
            return key, content, "preference", *times, "imported"
        case 1 if n % 5 == 0:
            secret = f"my password is Tr0ub4dor&{n}x"
            return "login_hint", secret, "fact", *times, "secret"
        case 2 if n % 7 == 0:
            return f"sk-proj-{n:04d}AbCdEfGhIjKlMnOpQrSt", "An API key", "fact", *times, "secret"
        case 3:
            content = f"Working on the thesis project number {n}."
            return "current_project", content, "project", *times, "imported"
        case 4 if n % 6 == 0:
            return "!!!", "punctuation key", "fact", *times, "invalid_key"
        case 5 if n % 10 == 0:
            return "k" * 80, "a key that is too long", "fact", *times, "invalid_key"
        case 6 if n % 8 == 0:
            return "life_story", "x" * 1200, "background", *times, "content_too_long"
        case 7 if n % 9 == 0:
            return "misc_note", "Something uncategorised.", "misc", *times, "unknown_category"
        case 8 if n % 11 == 0:
            return "Favourite Food", "Dumplings.", "preference", *times, "key_collision"
        case 9 if n % 11 == 0:
            later = _text(updated + timedelta(days=400), naive)
            return "favourite_food", "Noodles.", "preference", times[0], later, "imported"
        case 10 if n % 13 == 0:
            return (
                "odd_times",
                "Has a broken timestamp.",
                "fact",
                "yesterday",
                times[1],
                ("invalid_timestamp"),
            )
        case 11 if n % 17 == 0:
            return "blank", " \n\t ", "fact", *times, "invalid_content"
    return *plain, *times, "imported"


def _text(at: datetime, naive: bool) -> str:
    return at.replace(tzinfo=None).isoformat() if naive else at.isoformat()
