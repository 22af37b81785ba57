"""Check the recall evaluation set of issue 15 (the format is described in EVALSET.md).

Reads every memories_*.jsonl and queries_*.jsonl in this folder (one writer's group per letter)
and prints each problem with its file and line, then counts per group, kind, language and
split. Exit status 1 when a problem was found.

    PYTHONPATH=$PWD .venv/bin/python tests/retrieval/recall_set/check_set.py
    PYTHONPATH=$PWD .venv/bin/python tests/retrieval/recall_set/check_set.py --no-domain

Only the standard library is needed. When `domain` can be imported (PYTHONPATH at the
repository) every memory is also checked with the product's own rules (key, content and
category values, the sensitive-content guard, the workspace content rules), so that loading
the set through the API cannot fail; --no-domain skips that.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys
from collections.abc import Callable
from typing import Any, Final

HERE: Final = pathlib.Path(__file__).resolve().parent
MEMORY_FIELDS: Final = ("label", "user", "scope", "memory_key", "category", "content", "lang")
QUERY_FIELDS: Final = ("id", "split", "kind", "user", "workspace", "query", "expected", "lang")
SCOPES: Final = ("global", "learning", "teaching", "research")
WORKSPACES: Final = ("learning", "teaching", "research")
# A copy of domain.model.values' lists, so that this runs without the repository on the path;
# `domain_checker` reports any drift when domain can be imported.
CATEGORIES: Final = (
    "preference",
    "goal",
    "constraint",
    "background",
    "fact",
    "profile",
    "project",
    "other",
)
LANGS: Final = ("zh", "en", "mixed")
SPLITS: Final = ("tuning", "validation", "test")
KINDS: Final = ("keyword", "question", "paraphrase", "cross_language", "mixed", "unrelated")
KEY: Final = re.compile(r"[a-z][a-z0-9_]*")
USER: Final = re.compile(r"([abc])\d\d_[a-z0-9_]+")
QUERY_ID: Final = re.compile(r"([abc])-q\d{4}")
MAX_KEY: Final = 60
CONTENT_CHARS: Final = (8, 1000)
CONTENT_ADVISED: Final = 200
MIN_UNRELATED: Final = 0.20


def _rows(path: pathlib.Path, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path.name}:{number}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append(f"{where}: not JSON ({error})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        rows.append((where, row))
    return rows


def _fields(where: str, row: dict[str, Any], fields: tuple[str, ...], problems: list[str]) -> bool:
    missing = [f for f in fields if f not in row]
    unknown = [f for f in row if f not in fields]
    if missing or unknown:
        problems.append(f"{where}: missing fields {missing}, unknown fields {unknown}")
        return False
    return True


def domain_checker() -> Callable[[dict[str, Any]], str | None] | None:
    """The product's own rules for one memory row, or None when `domain` cannot be imported."""
    try:
        from domain.model import values
        from domain.model.sensitive import find_sensitive
        from domain.model.values import check_category, check_content, check_key
        from domain.model.workspace_rules import find_workspace_violation
    except ImportError:
        return None

    drift = set(CATEGORIES) ^ set(values.CATEGORIES) or set(WORKSPACES) ^ set(values.WORKSPACES)

    def check(row: dict[str, Any]) -> str | None:
        if drift:
            return f"check_set.py's categories or workspaces differ from the domain's: {drift}"
        try:
            check_key(row["memory_key"])
            check_content(row["content"])
            check_category(row["category"])
        except Exception as error:  # the domain's errors are reported as text
            return f"refused by the domain: {error!r}"
        for field in ("memory_key", "content"):
            match = find_sensitive(row[field])
            if match is not None:
                return f"{field} looks sensitive ({match.kind})"
        if row["scope"] in WORKSPACES:
            violation = find_workspace_violation(row["scope"], row["content"])
            if violation is not None:
                return f"breaks the {row['scope']} rule {violation.rule}"
        return None

    return check


def check_memories(
    paths: list[pathlib.Path],
    problems: list[str],
    warnings: list[str],
    domain: Callable[[dict[str, Any]], str | None] | None,
) -> dict[str, dict[str, Any]]:
    memories: dict[str, dict[str, Any]] = {}
    slots: set[tuple[str, str, str]] = set()
    for path in paths:
        group = path.stem.rsplit("_", 1)[-1]
        for where, row in _rows(path, problems):
            if not _fields(where, row, MEMORY_FIELDS, problems):
                continue
            user, scope, key, content = row["user"], row["scope"], row["memory_key"], row["content"]
            user_match = USER.fullmatch(str(user))
            if not user_match or user_match.group(1) != group:
                problems.append(f"{where}: user {user!r} is not <{group}NN_name>")
            if scope not in SCOPES:
                problems.append(f"{where}: unknown scope {scope!r}")
            if row["category"] not in CATEGORIES:
                problems.append(f"{where}: unknown category {row['category']!r}")
            if row["lang"] not in LANGS:
                problems.append(f"{where}: unknown lang {row['lang']!r}")
            if not isinstance(key, str) or not KEY.fullmatch(key) or len(key) > MAX_KEY:
                problems.append(f"{where}: memory_key {key!r} is not lower snake_case <= {MAX_KEY}")
            if not isinstance(content, str) or not (
                CONTENT_CHARS[0] <= len(content.strip()) <= CONTENT_CHARS[1]
            ):
                problems.append(f"{where}: content length not in {CONTENT_CHARS}")
            elif len(content) > CONTENT_ADVISED:
                warnings.append(f"{where}: content longer than {CONTENT_ADVISED} characters")
            label = row["label"]
            if label not in (f"{user}.{key}", f"{user}.{key}.{scope}"):
                problems.append(f"{where}: label {label!r} is not <user>.<key>[.<scope>]")
            if label in memories:
                problems.append(f"{where}: label {label!r} used twice")
            slot = (user, scope, key)
            if slot in slots:
                problems.append(f"{where}: a second memory under key {key!r} in {scope}")
            slots.add(slot)
            if domain is not None:
                refused = domain(row)
                if refused:
                    problems.append(f"{where}: {label}: {refused}")
            memories[label] = {**row, "_where": where}
    return memories


def visible(memory: dict[str, Any], user: str, workspace: str, pool: dict[str, Any]) -> bool:
    """What the search tool may return: the user's global and workspace memories, where a
    workspace memory hides the global one of the same key."""
    if memory["user"] != user or memory["scope"] not in ("global", workspace):
        return False
    if memory["scope"] == "global":
        return not any(
            (m["user"], m["scope"], m["memory_key"]) == (user, workspace, memory["memory_key"])
            for m in pool.values()
        )
    return True


def check_queries(
    paths: list[pathlib.Path], memories: dict[str, dict[str, Any]], problems: list[str]
) -> list[dict[str, Any]]:
    queries: list[dict[str, Any]] = []
    ids: set[str] = set()
    users = {m["user"] for m in memories.values()}
    splits: dict[str, set[str]] = collections.defaultdict(set)
    for path in paths:
        group = path.stem.rsplit("_", 1)[-1]
        for where, row in _rows(path, problems):
            if not _fields(where, row, QUERY_FIELDS, problems):
                continue
            qid, user, workspace = row["id"], row["user"], row["workspace"]
            expected = row["expected"]
            id_match = QUERY_ID.fullmatch(str(qid))
            if not id_match or id_match.group(1) != group:
                problems.append(f"{where}: id {qid!r} is not {group}-qNNNN")
            if qid in ids:
                problems.append(f"{where}: id {qid!r} used twice")
            ids.add(qid)
            if row["split"] not in SPLITS:
                problems.append(f"{where}: unknown split {row['split']!r}")
            if row["kind"] not in KINDS:
                problems.append(f"{where}: unknown kind {row['kind']!r}")
            if workspace not in WORKSPACES:
                problems.append(f"{where}: unknown workspace {workspace!r}")
            if row["lang"] not in LANGS:
                problems.append(f"{where}: unknown lang {row['lang']!r}")
            if user not in users:
                problems.append(f"{where}: user {user!r} has no memory")
            if not isinstance(row["query"], str) or not row["query"].strip():
                problems.append(f"{where}: empty query")
            if not isinstance(expected, list):
                problems.append(f"{where}: expected is not a list")
                continue
            if (row["kind"] == "unrelated") != (not expected):
                problems.append(f"{where}: expected must be empty exactly for unrelated queries")
            if len(set(expected)) != len(expected):
                problems.append(f"{where}: an expected label twice")
            for label in expected:
                memory = memories.get(label)
                if memory is None:
                    problems.append(f"{where}: unknown label {label!r}")
                elif not visible(memory, user, workspace, memories):
                    problems.append(f"{where}: expects {label}, not visible to {user}@{workspace}")
            splits[user].add(row["split"])
            queries.append(row)
    for user, found in sorted(splits.items()):
        if len(found) > 1:
            problems.append(f"user {user} has queries in several splits: {sorted(found)}")
    unrelated = sum(q["kind"] == "unrelated" for q in queries)
    if queries and unrelated / len(queries) < MIN_UNRELATED:
        problems.append(f"unrelated queries {unrelated}/{len(queries)} below {MIN_UNRELATED:.0%}")
    return queries


def _table(title: str, rows: list[dict[str, Any]], column: str, values: tuple[str, ...]) -> str:
    counts = collections.Counter(r[column] for r in rows)
    cells = "  ".join(f"{v} {counts.get(v, 0)}" for v in values)
    return f"{title:<22}{cells}"


def report(memories: dict[str, dict[str, Any]], queries: list[dict[str, Any]]) -> str:
    mem_rows = list(memories.values())
    users = collections.Counter(m["user"] for m in mem_rows)
    user_split = {q["user"]: q["split"] for q in queries}
    lines = [
        f"memories {len(mem_rows)}  users {len(users)}  queries {len(queries)}",
        _table("memories per scope", mem_rows, "scope", SCOPES),
        _table("memories per lang", mem_rows, "lang", LANGS),
        _table("memories per category", mem_rows, "category", CATEGORIES),
        _table("queries per kind", queries, "kind", KINDS),
        _table("queries per lang", queries, "lang", LANGS),
        _table("queries per split", queries, "split", SPLITS),
        _table("users per split", [{"s": s} for s in user_split.values()], "s", SPLITS),
    ]
    groups = sorted({m["user"][0] for m in mem_rows})
    for group in groups:
        group_queries = [q for q in queries if q["user"][0] == group]
        group_users = [u for u in users if u[0] == group]
        lines.append(
            f"group {group}: users {len(group_users)}  memories "
            f"{sum(users[u] for u in group_users)}  queries {len(group_queries)}"
        )
    lines.append(f"\n{'split / kind':<16}" + "".join(f"{k:>15}" for k in KINDS))
    for split in SPLITS:
        counts = collections.Counter(q["kind"] for q in queries if q["split"] == split)
        lines.append(f"{split:<16}" + "".join(f"{counts.get(k, 0):>15}" for k in KINDS))
    lines.append(f"\n{'split / lang':<16}" + "".join(f"{x:>10}" for x in LANGS))
    for split in SPLITS:
        counts = collections.Counter(q["lang"] for q in queries if q["split"] == split)
        lines.append(f"{split:<16}" + "".join(f"{counts.get(x, 0):>10}" for x in LANGS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dir", type=pathlib.Path, default=HERE, help="the set's folder")
    parser.add_argument("--no-domain", action="store_true", help="skip the product's own rules")
    parser.add_argument("--warnings", action="store_true", help="also list the warnings")
    args = parser.parse_args(argv)
    problems: list[str] = []
    warnings: list[str] = []
    domain = None if args.no_domain else domain_checker()
    memories = check_memories(sorted(args.dir.glob("memories_*.jsonl")), problems, warnings, domain)
    queries = check_queries(sorted(args.dir.glob("queries_*.jsonl")), memories, problems)
    print(report(memories, queries))
    print(
        "\ndomain rules: "
        + ("checked" if domain else "SKIPPED (set PYTHONPATH to the repository to check them)")
    )
    print(f"warnings: {len(warnings)}")
    for warning in warnings if args.warnings else ():
        print(f"  {warning}")
    print(f"problems: {len(problems)}")
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
