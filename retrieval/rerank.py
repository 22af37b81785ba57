"""The optional reranker stage: a cross-encoder rescores the first few candidates of a search.

`Reranker(scorer, top=10, budget=0.3)` is built once (api/bootstrap.py) and handed to
`MemorySearch`, which wraps each search's fused ranking in `Reranked`. For a search it sends
the query and the contents of the first `top` candidates of the fused order (before the
threshold, so the reranker can also lift a candidate the fusion scored below it) to the
scorer (retrieval/rerankers.py: a `/rerank` endpoint or a local CrossEncoder) and waits at
most `budget` seconds, and never past the request's deadline. Then:

- each of those candidates' `relevance` becomes the scorer's probability that it answers the
  query (0..1; raw logits go through a sigmoid, `to_relevance`), and they are ordered by it
  (ties: the fused order);
- the candidates below them follow in the fused order, their relevance capped at the lowest
  reranked one, so items stay ordered by relevance;
- only then `min_relevance` applies (default: the fusion's threshold) and the budgets.

On a timeout, an error or an answer it cannot trust (not JSON, a wrong length, an index out of
range or repeated, a score that is NaN, infinite or outside 0..1 when probabilities were
expected) the search keeps the fused order and relevance: nothing reaches the caller but a
search without the reranker. The outcome is counted (`RerankState`: applied, timeout, error,
skipped), logged without query or content, and the reranker is not asked again for
`retry_after` seconds (searches meanwhile are `skipped`); /readyz reports it degraded until it
answers again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, Protocol

from domain import context
from retrieval.fusion import THRESHOLD, FusedRanker
from retrieval.query import MAX_LIMIT, Query, Scored, SearchRow

__all__ = [
    "DOCUMENT_CHARS",
    "RerankError",
    "RerankState",
    "RerankTimeout",
    "Reranked",
    "Reranker",
    "ScoreKind",
    "Scorer",
    "to_relevance",
]

ScoreKind = Literal["probability", "logit"]
DOCUMENT_CHARS: Final = 2000
"""Characters of a memory's content sent to the reranker (the contract caps an item at 160
tokens; rerankers truncate at 512 tokens anyway)."""

_log = logging.getLogger(__name__)


class RerankError(RuntimeError):
    """The reranker cannot be loaded, did not answer, or answered what cannot be trusted."""


class RerankTimeout(RerankError):
    """The reranker did not answer within the time it was given."""


class Scorer(Protocol):
    """Scores documents against a query; one score per document, in their order."""

    name: str
    """Names the model (the search cache keys on it); never a secret."""
    bounded: bool
    """True: a call keeps its `timeout` itself (an HTTP request), so the stage makes it in the
    search's own thread; False: the stage makes it on threads of its own and stops waiting at
    the budget (a local model cannot be interrupted)."""

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        """Relevance of each document to `query` (0..1). Raises RerankError (RerankTimeout
        past `timeout` seconds, when bounded)."""
        ...

    def warm_up(self) -> None:
        """Load what the first call would (a local model); raises RerankError."""
        ...


def to_relevance(raw: Sequence[object], expected: int, kind: ScoreKind) -> list[float]:
    """`raw` scores as relevance 0..1: probabilities as they are, logits through a sigmoid.

    RerankError unless there are `expected` finite numbers (and, for probabilities, all
    within 0..1): an untrusted server's answer is checked, never clamped into shape.
    """
    if len(raw) != expected:
        raise RerankError(f"{len(raw)} scores for {expected} documents")
    out: list[float] = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RerankError(f"a score is {type(value).__name__}, not a number")
        score = float(value)
        if not math.isfinite(score):
            raise RerankError("a score is not finite")
        if kind == "logit":
            score = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))
        elif not 0.0 <= score <= 1.0:
            raise RerankError(f"a score ({score:g}) is outside 0..1 (raw logits? scores=logit)")
        out.append(score)
    return out


@dataclass(frozen=True, slots=True)
class RerankState:
    """What /readyz and /metrics say about the reranker."""

    name: str
    available: bool
    """False while failing (the last call timed out or failed): searches keep the fused order."""
    error: str | None
    applied: int = 0
    timeouts: int = 0
    errors: int = 0
    skipped: int = 0
    """Searches that did not ask it: it failed less than `retry_after` seconds before."""
    seconds: float = 0.0
    """Time searches spent in the stage (waiting for the scorer), whatever the outcome."""


class Reranker:
    """The stage around one scorer: budget, fallback, back-off and counts (thread-safe)."""

    def __init__(
        self,
        scorer: Scorer,
        *,
        top: int = 10,
        budget: float = 0.3,
        retry_after: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if top < 1 or budget <= 0 or retry_after < 0:
            raise ValueError("top must be at least 1, budget positive, retry_after >= 0")
        self.scorer = scorer
        self.top = top
        """Candidates of the fused order that are reranked."""
        self.budget = budget
        """Seconds a search waits for the scores."""
        self.retry_after = retry_after
        self.clock = clock
        # An unbounded scorer's calls run here so a search can stop waiting; one past its budget
        # finishes on its own while the search goes on with the fused order.
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="memledger-rerank")
        self._lock = threading.Lock()
        self._down_until = -math.inf
        self._error: str | None = None
        self._counts = {"applied": 0, "timeout": 0, "error": 0, "skipped": 0}
        self._seconds = 0.0

    @property
    def version(self) -> str:
        """What the search cache keys a reranked result on."""
        return f"rerank-1/{self.scorer.name}/{self.top}"

    def asked(self) -> bool:
        """Whether a search now would ask it (False while it is left alone after a failure):
        the search cache looks up a result of the order a search would give."""
        with self._lock:
            return self.clock() >= self._down_until

    def state(self) -> RerankState:
        """A snapshot for /readyz and /metrics."""
        with self._lock:
            c = self._counts
            return RerankState(
                self.scorer.name,
                self._error is None,
                self._error,
                c["applied"],
                c["timeout"],
                c["error"],
                c["skipped"],
                self._seconds,
            )

    def warm_up(self) -> bool:
        """Load the scorer now (at start-up) rather than in a search; True if it works."""
        try:
            self.scorer.warm_up()
        except Exception as error:
            self._failed("error", error)
            return False
        return True

    def rerank(self, query: Query, ranked: Sequence[Scored]) -> list[Scored] | None:
        """`ranked` (the fused order) with its first `top` rescored and reordered, or None:
        keep the fused order (the reranker timed out, failed, or is backing off)."""
        head = list(ranked[: self.top])
        if not head:
            return None
        with self._lock:
            if self.clock() < self._down_until:
                self._counts["skipped"] += 1
                return None
        budget = self.budget
        left = context.remaining()
        if left is not None:
            budget = max(0.0, min(budget, left))
        documents = [s.row.content[:DOCUMENT_CHARS] for s in head]
        started = time.perf_counter()
        try:
            scores = to_relevance(
                self._scores(query.text, documents, budget), len(head), "probability"
            )
        except RerankTimeout:
            self._failed("timeout", None, budget, started)
            return None
        except Exception as error:  # RerankError, or a bug in a scorer: never a 500
            self._failed("error", error, budget, started)
            return None
        with self._lock:
            self._counts["applied"] += 1
            self._seconds += time.perf_counter() - started
            self._error = None
        order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep fused
        lowest = round(min(scores), 6)
        return [Scored(head[i].row, round(scores[i], 6)) for i in order] + [
            Scored(s.row, min(s.score, lowest)) for s in ranked[self.top :]
        ]

    def _scores(self, query: str, documents: list[str], budget: float) -> list[float]:
        if budget <= 0:
            raise RerankTimeout("the request's deadline has passed")
        if self.scorer.bounded:  # no thread hop: each costs a GIL handover under load
            return self.scorer.scores(query, documents, budget)
        job = self._pool.submit(self.scorer.scores, query, documents, budget)
        try:
            return job.result(timeout=budget)
        except FutureTimeout:
            job.cancel()  # dropped if it has not started
            raise RerankTimeout(f"no answer within {budget:g} s") from None

    def _failed(
        self,
        outcome: str,
        error: BaseException | None,
        budget: float = 0.0,
        started: float | None = None,
    ) -> None:
        if error is None:
            detail = f"no answer within {budget * 1000:.0f} ms"
        elif isinstance(error, RerankError):
            detail = str(error)
        else:
            detail = type(error).__name__
        with self._lock:
            self._counts[outcome] += 1
            if started is not None:
                self._seconds += time.perf_counter() - started
            self._error = detail
            self._down_until = self.clock() + self.retry_after
        _log.warning(
            "reranker %s: %s; fused order for %.0f s",
            self.scorer.name,
            detail,
            self.retry_after,
            extra={"request_id": context.current_request_id()},
        )


class Reranked:
    """A search's fused ranking with the reranker applied (`search()` takes it as its ranker);
    `applied` says afterwards whether the reranker's order was used."""

    def __init__(self, fused: FusedRanker, reranker: Reranker) -> None:
        self.fused = fused
        self.reranker = reranker
        self.applied = False

    def rank(
        self,
        query: Query,
        rows: Sequence[SearchRow],
        *,
        now: datetime,
        min_relevance: float | None = None,
        limit: int = MAX_LIMIT,
    ) -> list[Scored]:
        """As `FusedRanker.rank`, the first candidates reranked before the threshold applies."""
        floor = THRESHOLD if min_relevance is None else min_relevance
        head = max(limit, self.reranker.top)  # the order of every row it rescores is exact
        every = self.fused.rank(query, rows, now=now, min_relevance=0.0, limit=head)
        reranked = self.reranker.rerank(query, every)
        self.applied = reranked is not None
        return [s for s in (every if reranked is None else reranked) if s.score >= floor]

    @property
    def tag(self) -> str:
        """The cache version's suffix: the reranker's when its order was used, else none."""
        return f"/{self.reranker.version}" if self.applied else ""
