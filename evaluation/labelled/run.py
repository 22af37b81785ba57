"""Running the labelled set through the product: each memory written with the ledger's own
commands at its own time, then every query sent to `POST /tools/search_core_memories` (the path
an agent takes: token, scope filter, workspace hiding global, category option, budgets), with
lexical search and, given embeddings, with hybrid search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol
from uuid import UUID

from api.services import Services
from api.tokens import mint_token
from evaluation.labelled.cases import EvalSet, MemorySpec, check_set, leaks_of
from evaluation.labelled.scores import Outcome, summarise
from retrieval.hybrid import HybridSource
from retrieval.search import MemorySearch
from retrieval.vectors.service import EmbeddingService

__all__ = ["SEARCH_PATH", "Clock", "evaluate", "load_memories", "run_queries"]

SEARCH_PATH: Final = "/tools/search_core_memories"


class SettableClock(Protocol):
    now: datetime

    def __call__(self) -> datetime: ...


class Clock:
    """A clock the loader sets (the ledger asks it for the time of every command)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def load_memories(
    ledger: Any, clock: SettableClock, memories: Sequence[MemorySpec], now: datetime
) -> dict[str, UUID]:
    """Write the set with the ledger's commands, each at its own time; label -> memory id.

    Commands run in time order (the clock never goes back): create at `now - age_days`, then
    suppress or forget a minute later where the set says so. The clock is left at `now`.
    """
    ids: dict[str, UUID] = {}
    steps: list[tuple[datetime, int, str, MemorySpec]] = []
    for order, m in enumerate(memories):
        written = now - timedelta(days=m.age_days)
        steps.append((written, order, "create", m))
        if m.status != "active":
            steps.append((written + timedelta(minutes=1), order, m.status, m))
    for at, _, action, m in sorted(steps, key=lambda step: (step[0], step[1])):
        clock.now = at
        if action == "create":
            outcome = ledger.create_memory(
                m.user,
                scope=m.scope_value,
                memory_key=m.memory_key,
                content=m.content,
                category=m.category,
                source_type=m.source_type,
                review_after=_days(now, m.review_in_days),
                expires_at=_days(now, m.expires_in_days),
            )
            if outcome.memory is None or outcome.status != "created":
                raise RuntimeError(f"{m.label}: not created ({outcome.status})")
            ids[m.label] = outcome.memory.memory_id
        elif action == "suppressed":
            ledger.suppress_memory(m.user, ids[m.label])
        else:
            ledger.forget_memory(m.user, ids[m.label])
    clock.now = now
    return ids


def _days(now: datetime, days: float | None) -> datetime | None:
    return None if days is None else now + timedelta(days=days)


def run_queries(
    client: Any, jwt_secret: str, data: EvalSet, ids: Mapping[str, UUID]
) -> list[Outcome]:
    """Send every query to the search tool over HTTP as its user and workspace."""
    labels = {memory_id: label for label, memory_id in ids.items()}
    outcomes = []
    for q in data.queries:
        token = mint_token(jwt_secret, q.user, workspace=q.workspace)
        body: dict[str, Any] = {"query": q.query}
        if q.category is not None:
            body["category"] = q.category
        response = client.post(SEARCH_PATH, json=body, headers={"Authorization": f"Bearer {token}"})
        if response.status_code != 200:
            raise RuntimeError(f"{q.id}: HTTP {response.status_code}: {response.text}")
        returned = tuple(
            labels.get(UUID(item["memory_id"]), f"unknown:{item['memory_id']}")
            for item in response.json()["items"]
        )
        outcomes.append(Outcome(q, returned, leaks_of(q, returned, data)))
    return outcomes


def evaluate(
    ledger: Any,
    clock: SettableClock,
    worker: Any,
    client: Any,
    services: Services,
    data: EvalSet | None = None,
    embeddings: EmbeddingService | None = None,
) -> dict[str, dict[str, Any]]:
    """Load the set through `ledger`, wait for the projections, query through `client`.

    The queries run with lexical search (`services.embeddings` None), then, given
    `embeddings` (whose vectors the worker's embeddings projection computed), with hybrid
    search: one report per ranker, {"lexical": ..., "hybrid": ...}.
    """
    data = data or EvalSet.load()
    problems = check_set(data)
    if problems:
        raise ValueError("the labelled set is inconsistent:\n  " + "\n  ".join(problems))
    now = clock.now.replace(microsecond=0)
    ids = load_memories(ledger, clock, data.memories, now)
    if not worker.wait_all(600.0):
        raise RuntimeError("projections did not catch up within 600 s")
    reports: dict[str, dict[str, Any]] = {}
    services.search = lexical = MemorySearch(services.search_cache)
    reports["lexical"] = summarise(
        data, run_queries(client, services.jwt_secret, data, ids), lexical.version()
    )
    if embeddings is not None:
        services.search = hybrid = MemorySearch(
            services.search_cache, vectors=HybridSource(embeddings)
        )
        try:
            outcomes = run_queries(client, services.jwt_secret, data, ids)
            reports["hybrid"] = summarise(data, outcomes, hybrid.version())
        finally:
            services.search = lexical
    return reports
