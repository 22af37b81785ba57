"""From legacy rows to ledger commands: user mapping, the domain's checks, categories, collisions.

Every row ends in exactly one outcome. Rows that cannot become a memory get one reason:

    unmapped_user      the user_name is not in the user map (never guessed)
    invalid_row        a value is not text (SQLite does not enforce column types)
    invalid_key        the key breaks the ledger's key rules (characters, length, empty)
    secret             the key or the content holds a secret (section 15); detail: field + kind
    invalid_content    empty after cleaning, or a NUL character
    content_too_long   longer than the ledger allows after cleaning
    unknown_category   a legacy category that is neither a ledger category nor mapped
    invalid_timestamp  created_at / updated_at is not an ISO 8601 time (or a number)
    key_collision      two legacy keys of one user are one key once normalised; the row
                       updated last is imported, the other is reported
    conflict           (at run time) the ledger already holds this key with other content
    ledger_error       (at run time) the ledger kept failing; re-run to resume

Categories: a ledger category (any case) stays itself - `project` included, always as a
global compatibility record, never anything project-scoped (section 20.2); legacy `general`
(the legacy default) and an empty category become `other`; anything else is
`unknown_category` unless the operator maps it explicitly (`--map-category legacy=ledger`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any, Final

from domain.errors import InvalidInput, SensitiveContent
from domain.model.sensitive import find_sensitive
from domain.model.values import (
    CATEGORIES,
    MAX_CONTENT_CHARS,
    check_category,
    check_content,
    check_key,
    clean_content,
)
from migration.legacy import LegacyRow

__all__ = [
    "DEFAULT_CATEGORY_MAP",
    "LEGACY_SYSTEM",
    "REASONS",
    "PlannedRow",
    "Skip",
    "UserMapError",
    "load_user_map",
    "parse_category_map",
    "plan_rows",
]

LEGACY_SYSTEM: Final = "legacy-coremem"
REASONS: Final = (
    "unmapped_user",
    "invalid_row",
    "invalid_key",
    "secret",
    "invalid_content",
    "content_too_long",
    "unknown_category",
    "invalid_timestamp",
    "key_collision",
    "conflict",
    "ledger_error",
)
DEFAULT_CATEGORY_MAP: Final = {"general": "other", "": "other"}
_MAX_USER_ID: Final = 200
_SHOWN_CHARS: Final = 200


class UserMapError(Exception):
    """The user map file cannot be used as it is."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a row does not become a memory; `detail` never holds content."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class PlannedRow:
    """A legacy row and what to do with it: a memory to create, or a skip with its reason."""

    row: LegacyRow
    user_id: str | None
    key_shown: str | None  # the legacy key as a report may show it; None when it holds a secret
    memory_key: str = ""
    content: str = ""
    category: str = ""
    origin: dict[str, str] | None = None
    updated_at: datetime | None = None
    skip: Skip | None = None


# -- the user map ----------------------------------------------------------------------------


def load_user_map(path: Path) -> dict[str, str]:
    """user_name -> user_id from JSON ({"name": "id", ...}) or CSV (header user_name,user_id).

    One-to-one: a user_name listed twice with different ids, or two names sharing one id, is
    refused, as are empty ids and ids over 200 characters.
    """
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise UserMapError(f"{path}: {error.strerror or error}") from None
    start = text.lstrip()[:1]
    if path.suffix.lower() == ".json" or (path.suffix.lower() != ".csv" and start in ("{", "[")):
        pairs = _json_pairs(path, text)
    else:
        pairs = _csv_pairs(path, text)
    mapping: dict[str, str] = {}
    owners: dict[str, str] = {}
    for where, name, user_id in pairs:
        if not isinstance(name, str) or not isinstance(user_id, str):
            raise UserMapError(f"{path}{where}: user_name and user_id must be strings")
        name, user_id = name.strip(), user_id.strip()  # the legacy store stripped names too
        if not user_id or len(user_id) > _MAX_USER_ID:
            raise UserMapError(f"{path}{where}: user_id must have 1 to {_MAX_USER_ID} characters")
        if mapping.get(name, user_id) != user_id:
            raise UserMapError(f"{path}{where}: user_name {name!r} is mapped twice")
        if owners.get(user_id, name) != name:
            raise UserMapError(
                f"{path}{where}: user_id {user_id!r} is given to both {owners[user_id]!r} and"
                f" {name!r}; the map must be one-to-one"
            )
        mapping[name], owners[user_id] = user_id, name
    if not mapping:
        raise UserMapError(f"{path}: maps no user")
    return mapping


def _json_pairs(path: Path, text: str) -> list[tuple[str, Any, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserMapError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise UserMapError(f'{path}: expected a JSON object {{"user_name": "user_id", ...}}')
    return [(f": {name!r}", name, user_id) for name, user_id in data.items()]


def _csv_pairs(path: Path, text: str) -> list[tuple[str, Any, Any]]:
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or {"user_name", "user_id"} - set(reader.fieldnames):
        raise UserMapError(f"{path}: expected a CSV header with the columns user_name,user_id")
    return [(f" line {reader.line_num}", r["user_name"], r["user_id"]) for r in reader]


def parse_category_map(items: Iterable[str]) -> dict[str, str]:
    """The default category map plus `legacy=ledger` items (legacy names compared lower-case)."""
    mapping = dict(DEFAULT_CATEGORY_MAP)
    for item in items:
        legacy, sep, target = item.partition("=")
        if not sep or target not in CATEGORIES:
            raise ValueError(
                f"{item!r}: expected legacy=category with a category of {', '.join(CATEGORIES)}"
            )
        mapping[legacy.strip().lower()] = target
    return mapping


# -- planning --------------------------------------------------------------------------------


def plan_rows(
    rows: Iterable[LegacyRow],
    users: Mapping[str, str],
    *,
    category_map: Mapping[str, str] = DEFAULT_CATEGORY_MAP,
    naive_tz: tzinfo = UTC,
) -> list[PlannedRow]:
    """Check every row the way the ledger will, then settle key collisions within each user."""
    planned = [_plan_row(row, users, category_map, naive_tz) for row in rows]
    return _settle_collisions(planned)


def _plan_row(
    row: LegacyRow, users: Mapping[str, str], category_map: Mapping[str, str], naive_tz: tzinfo
) -> PlannedRow:
    key_shown = _shown_key(row.memory_key)
    user_id = users.get(row.user_name) if isinstance(row.user_name, str) else None
    base = PlannedRow(row, user_id, key_shown)
    if user_id is None:
        return _skipped(base, "unmapped_user", "user_name is not in the user map")
    texts = (row.user_name, row.memory_key, row.content, row.category)
    if not all(isinstance(value, str) for value in texts):
        return _skipped(base, "invalid_row", "user_name, memory_key, content, category: not text")
    try:
        key = check_key(row.memory_key)
    except SensitiveContent as error:
        return _skipped(base, "secret", f"memory_key: {error.kind}")
    except InvalidInput as error:
        return _skipped(base, "invalid_key", error.message)
    try:
        content = check_content(row.content)
    except SensitiveContent as error:
        return _skipped(base, "secret", f"content: {error.kind}")
    except InvalidInput as error:
        too_long = len(clean_content(row.content)) > MAX_CONTENT_CHARS
        return _skipped(base, "content_too_long" if too_long else "invalid_content", error.message)
    category = _category(row.category, category_map)
    if category is None:
        detail = f"legacy category {row.category[:40]!r} is not mapped (--map-category)"
        return _skipped(base, "unknown_category", detail)
    try:
        created_at = _parse_time(row.created_at, naive_tz)
        updated_at = _parse_time(row.updated_at, naive_tz)
    except ValueError as error:
        return _skipped(base, "invalid_timestamp", str(error))
    origin = {"system": LEGACY_SYSTEM, "legacy_id": str(row.legacy_id)}
    for name, at in (("created_at", created_at), ("updated_at", updated_at)):
        if at is not None:
            origin[name] = _iso(at)
    if category != row.category:
        origin["legacy_category"] = row.category[:_SHOWN_CHARS]
    return replace(
        base,
        memory_key=key,
        content=content,
        category=check_category(category),
        origin=origin,
        updated_at=updated_at,
    )


def _settle_collisions(planned: list[PlannedRow]) -> list[PlannedRow]:
    """Of rows of one user with the same normalised key, keep the one updated last."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(planned):
        if item.skip is None and item.user_id is not None:
            groups.setdefault((item.user_id, item.memory_key), []).append(index)
    lowest = datetime.min.replace(tzinfo=UTC)
    for indexes in groups.values():
        if len(indexes) < 2:
            continue
        winner = max(
            indexes, key=lambda i: (planned[i].updated_at or lowest, -planned[i].row.legacy_id)
        )
        for index in indexes:
            if index != winner:
                detail = (
                    f"same ledger key as legacy row {planned[winner].row.legacy_id}, which was"
                    " updated later and is imported instead"
                )
                planned[index] = _skipped(planned[index], "key_collision", detail)
    return planned


def _skipped(item: PlannedRow, reason: str, detail: str) -> PlannedRow:
    return replace(item, skip=Skip(reason, detail))


def _shown_key(key: object) -> str | None:
    if not isinstance(key, str) or find_sensitive(key) is not None:
        return None
    return key[:_SHOWN_CHARS]


def _category(legacy: str, category_map: Mapping[str, str]) -> str | None:
    name = legacy.strip().lower()
    if name in CATEGORIES:
        return name
    return category_map.get(name)


def _parse_time(value: object, naive_tz: tzinfo) -> datetime | None:
    """An ISO 8601 text (naive: in `naive_tz`) or a Unix time; None when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{value!r} is not a Unix time") from None
    if not isinstance(value, str):
        raise ValueError("a timestamp is neither text nor a number")
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=naive_tz)
    return at.astimezone(UTC)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
