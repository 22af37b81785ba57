"""The services container: everything the doors (routes, MCP, CLI) and the use cases need,
built once at start-up (api/bootstrap.py), with the read-your-writes positions of each user."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from api.access_log import AccessLog
from api.limits import UserLimits
from api.metrics import Metrics
from api.middleware import note_position
from api.tokens import MAX_TOKEN_LIFETIME
from domain import context
from domain.errors import LedgerUnavailable
from domain.ledger.access import AccessHit
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import Outcome
from projections.reads import Reads
from projections.worker import ProjectionWorker
from retrieval.cache import QueryCache, SearchKey
from retrieval.hybrid import HybridSource
from retrieval.owner import OwnerSearch
from retrieval.search import Found, MemorySearch
from retrieval.vectors.service import EmbeddingService
from service.ports import Shown

__all__ = ["Services"]

_log = logging.getLogger("memledger.api")


@dataclass
class Services:
    """Everything a route needs, built once at start-up."""

    ledger: MemoryLedger
    reads: Reads
    metrics: Metrics
    jwt_secret: str
    worker: ProjectionWorker | None = None
    max_token_lifetime: float = MAX_TOKEN_LIFETIME
    """Seconds a token's `exp` may lie ahead: a token expiring later is 401."""
    read_timeout: float = 5.0
    """Seconds a read waits for the projections to show the caller's writes (at most the time
    left to the request's deadline)."""
    request_deadline: float | None = None
    """Seconds within which every request is answered (api/deadline.py): 503 past it. `serve`
    sets MEMLEDGER_REQUEST_DEADLINE; None (services built by hand, in tests): no deadline."""
    retry_after: int = 1
    """Seconds a 503 asks the client to wait before retrying (Retry-After)."""
    max_body_bytes: int = 64 * 1024
    """Larger request bodies are refused with 413 (MEMLEDGER_MAX_BODY_BYTES)."""
    access_log: AccessLog | None = None
    """Where agent reads, searches and denials are recorded for audit (None: not recorded)."""
    search_cache: QueryCache[SearchKey, Found] | None = None
    """The short-TTL search cache of section 16 (None: off)."""
    embeddings: EmbeddingService | None = None
    """The embedder for hybrid search (None, or one without embedder: lexical only)."""
    embedding_worker: ProjectionWorker | None = None
    """The embeddings projection's own worker (its lag is reported; reads never wait for it)."""
    limits: UserLimits = field(default_factory=UserLimits)
    """Per-user concurrency (api/limits.py): past it, 429 with Retry-After."""
    max_concurrency: int = 0
    """Requests in flight in the process (api/middleware.py `Admission`); past it 503 with
    Retry-After. 0 (services built by hand, in tests): no cap."""
    search: MemorySearch | None = None
    """The search tool's engine, built once (api/bootstrap.py; else from the two above)."""
    owner_search: OwnerSearch | None = None
    """The owner's search (`GET /me/core-memories?q=`), built once beside `search`."""
    feed_poll: float = 1.0
    """Seconds between two looks for new changes of an idle change-feed stream."""
    feed_heartbeat: float = 10.0
    """Seconds between two heartbeat comments of an idle change-feed stream (at most 15)."""
    _written: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        vectors = HybridSource(self.embeddings) if self.embeddings is not None else None
        if self.search is None:
            self.search = MemorySearch(self.search_cache, vectors=vectors)
        if self.owner_search is None:
            self.owner_search = OwnerSearch(vectors=vectors)

    def wrote(self, user_id: str, outcome: Outcome) -> Outcome:
        """Remember the position of a user's write, so their next reads wait for it, and
        answer it as the request's `X-Position`. Every write route calls this, those that
        appended nothing (unchanged, duplicate) too: their position is the ledger head."""
        if outcome.position:
            with self._lock:
                self._written[user_id] = max(self._written.get(user_id, 0), outcome.position)
        note_position(outcome.position or self.ledger.position(user_id))
        return outcome

    def record_read(
        self,
        user_id: str,
        via: str,
        rows: Iterable[Shown],
        *,
        workspace: str | None = None,
    ) -> None:
        """Record for audit (`memory.read`) which memories a read returned, in order, by id.

        `via` names the tool or management endpoint (`api.get_memory`, …); rows need
        memory_id, scope_type, workspace_type and revision. Queued, never awaited.
        """
        if self.access_log is None:
            return
        hits = [AccessHit(r.memory_id, r.scope_type, r.workspace_type, r.revision) for r in rows]
        self.access_log.read(user_id, via, workspace, hits)

    def close(self) -> None:
        """At shutdown: write the access records still queued."""
        if self.access_log is not None:
            self.access_log.close()

    def wait_for(
        self, user_id: str, at_least: int = 0, projections: Sequence[str] | None = None
    ) -> None:
        """Wait (bounded) until the projections read show this user's writes (read-your-writes).

        `projections`: the ones the read uses (default: all of `worker`'s), so a projection
        lagging or stalled never holds back a read that does not use it. The embeddings are
        never waited for: search ranks a memory without a vector lexically, and never scores
        a forgotten one (see retrieval/hybrid.py).

        When they do not catch up in time the read is refused with 503 rather than served
        stale: a stale read could show a memory its owner has just forgotten.
        """
        with self._lock:
            position = max(self._written.get(user_id, 0), at_least)
        if not position or self.worker is None:
            return
        left = context.remaining()
        timeout = self.read_timeout if left is None else min(self.read_timeout, left)
        if not self.worker.wait(position, timeout=timeout, names=projections):
            _log.warning(
                "projections %s did not reach position %s in %.1fs",
                ", ".join(projections or ["(all)"]),
                position,
                timeout,
                extra={"user_id": user_id},
            )
            raise LedgerUnavailable(f"projections are behind position {position}; retry")

    def wait_for_ledger(self, projections: Sequence[str]) -> None:
        """Wait (bounded) until the projections read show every event committed before the
        call, in every partition (an auditor's read of the whole trail); else 503."""
        if self.worker is None:
            return
        left = context.remaining()
        timeout = self.read_timeout if left is None else min(self.read_timeout, left)
        if not self.worker.wait_all(timeout, projections):
            raise LedgerUnavailable("projections are behind the ledger; retry")
