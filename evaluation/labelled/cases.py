"""The labelled set of tests/retrieval/ (memories.jsonl, queries.jsonl): what it holds, who may
see which memory, and the checks of the set itself.

Each memory has a label, a user, a scope, an age and a status; each query a kind, a user and
workspace, and the labels it expects (best first) or forbids. A query may only ever return the
memories `allowed` for it (identity, status, scope, a global memory hidden by a workspace one).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from domain.model.values import CATEGORIES, WORKSPACES, Scope, normalise_key
from domain.policy import is_visible
from evaluation.recall_set import REPO_ROOT

__all__ = [
    "HARD_EMPTY_KINDS",
    "HARD_ORDER_KINDS",
    "KINDS",
    "SET_DIR",
    "STATUSES",
    "EvalSet",
    "K",
    "MemorySpec",
    "QuerySpec",
    "allowed",
    "check_set",
    "leaks_of",
]

SET_DIR: Final = REPO_ROOT / "tests" / "retrieval"
K: Final = 5
SEMANTIC_KINDS: Final = frozenset({"paraphrase", "cross_language"})
"""Kinds lexical search cannot answer: left out of the `guarded` summary (kept comparable with
the lexical baseline) but counted in `all`, and guarded per kind like every other kind."""
HARD_EMPTY_KINDS: Final = frozenset({"no_match"})
"""Kinds whose queries share no term with any memory the user may see: results must be empty.

Other queries expecting nothing (scope, status and shadow traps) only must not leak; that a
visible memory of the user matches one of their words is measured (empty-result precision),
not forbidden.
"""
HARD_ORDER_KINDS: Final = frozenset({"review"})
"""Kinds whose expected order is a rule (section 9.4: due for review ranks below an equal one)."""
KINDS: Final = (
    "exact_key",
    "phrase_zh",
    "phrase_en",
    "keyword_zh",
    "keyword_en",
    "mixed",
    "question_zh",
    "question_en",
    "normalisation",
    "category",
    "review",
    "shadow",
    "scope_trap",
    "status",
    "no_match",
    "paraphrase",
    "cross_language",
)
STATUSES: Final = ("active", "suppressed", "forgotten")


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """One labelled memory (a line of memories.jsonl)."""

    label: str
    user: str
    scope: str  # "global" or a workspace
    memory_key: str
    category: str
    content: str
    age_days: float
    source_type: str = "explicit"
    status: str = "active"
    expires_in_days: float | None = None
    review_in_days: float | None = None

    @property
    def scope_value(self) -> Scope:
        return Scope.global_() if self.scope == "global" else Scope.workspace(self.scope)

    @property
    def workspace_type(self) -> str | None:
        return None if self.scope == "global" else self.scope

    def retrievable(self) -> bool:
        """Active and unexpired at evaluation time."""
        expired = self.expires_in_days is not None and self.expires_in_days <= 0
        return self.status == "active" and not expired


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """One labelled query (a line of queries.jsonl): expected labels, best first."""

    id: str
    kind: str
    user: str
    workspace: str
    query: str
    expected: tuple[str, ...]
    category: str | None = None
    forbidden: tuple[str, ...] = ()
    note: str = ""

    @property
    def guarded(self) -> bool:
        return self.kind not in SEMANTIC_KINDS


@dataclass(frozen=True, slots=True)
class EvalSet:
    memories: tuple[MemorySpec, ...]
    queries: tuple[QuerySpec, ...]

    @classmethod
    def load(cls, directory: pathlib.Path = SET_DIR) -> EvalSet:
        # An unknown field fails here, on purpose: a typo must not silently drop a condition.
        memories = [MemorySpec(**row) for row in _jsonl(directory / "memories.jsonl")]
        queries = []
        for row in _jsonl(directory / "queries.jsonl"):
            row["expected"] = tuple(row["expected"])
            row["forbidden"] = tuple(row.get("forbidden", ()))
            queries.append(QuerySpec(**row))
        return cls(tuple(memories), tuple(queries))

    def by_label(self) -> dict[str, MemorySpec]:
        return {m.label: m for m in self.memories}


def _jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def allowed(query: QuerySpec, memory: MemorySpec, pool: Iterable[MemorySpec]) -> bool:
    """May `memory` appear in the results of `query` at all (identity, status, scope, shadow)?"""
    if memory.user != query.user or not memory.retrievable():
        return False
    if not is_visible(memory.scope_value.scope_type, memory.workspace_type, query.workspace):
        return False
    if memory.scope == "global":
        key = normalise_key(memory.memory_key)
        for other in pool:  # a retrievable workspace memory with the same key hides it
            if (
                other.user == memory.user
                and other.scope == query.workspace
                and other.retrievable()
                and normalise_key(other.memory_key) == key
            ):
                return False
    return True


def check_set(data: EvalSet) -> list[str]:
    """Problems of the set itself: duplicates, unknown labels, expectations it cannot meet."""
    problems: list[str] = []
    labels = data.by_label()
    if len(labels) != len(data.memories):
        problems.append("duplicate memory labels")
    if len({q.id for q in data.queries}) != len(data.queries):
        problems.append("duplicate query ids")
    live_keys: set[tuple[str, str, str]] = set()
    for m in data.memories:
        slot = (m.user, m.scope, normalise_key(m.memory_key))
        if m.status != "forgotten":  # a forgotten memory frees its key
            if slot in live_keys:
                problems.append(f"{m.label}: a second live memory under {slot}")
            live_keys.add(slot)
        if m.category not in CATEGORIES or m.status not in STATUSES:
            problems.append(f"{m.label}: unknown category or status")
        if m.scope != "global" and m.scope not in WORKSPACES:
            problems.append(f"{m.label}: unknown scope {m.scope!r}")
        if m.expires_in_days is not None and m.expires_in_days <= -m.age_days:
            problems.append(f"{m.label}: expires before it was written")
    for q in data.queries:
        if q.kind not in KINDS or q.workspace not in WORKSPACES:
            problems.append(f"{q.id}: unknown kind or workspace")
        if q.category is not None and q.category not in CATEGORIES:
            problems.append(f"{q.id}: unknown category {q.category!r}")
        if len(q.expected) != len(set(q.expected)):
            problems.append(f"{q.id}: an expected label twice")
        for label in (*q.expected, *q.forbidden):
            if label not in labels:
                problems.append(f"{q.id}: unknown label {label}")
        for label in q.expected:
            memory = labels.get(label)
            if memory is not None and not allowed(q, memory, data.memories):
                problems.append(f"{q.id}: expects {label}, which it may not see")
            if memory is not None and q.category not in (None, memory.category):
                problems.append(f"{q.id}: expects {label} outside the category option")
        for label in q.forbidden:
            memory = labels.get(label)
            if memory is not None and allowed(q, memory, data.memories):
                problems.append(f"{q.id}: forbids {label}, which it may see")
    return problems


def leaks_of(query: QuerySpec, returned: Sequence[str], data: EvalSet) -> tuple[str, ...]:
    """The returned labels `query` may not see (unknown ids included)."""
    specs = data.by_label()
    return tuple(
        label
        for label in returned
        if label not in specs or not allowed(query, specs[label], data.memories)
    )
