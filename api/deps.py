"""Request dependencies: the verified identity, the services, and read-your-writes waits."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.access_log import AccessLog
from api.auth import Identity, InvalidToken, verify_token
from api.metrics import Metrics
from domain.errors import LedgerUnavailable
from domain.ledger.access import AccessHit
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import Outcome
from projections.reads import Reads
from projections.worker import ProjectionWorker
from retrieval.cache import QueryCache, SearchKey
from retrieval.search import Found
from retrieval.vectors.service import EmbeddingService

__all__ = ["CurrentIdentity", "FreshReads", "Services", "ServicesDep", "fresh_reads"]


_log = logging.getLogger("memledger.api")


@dataclass
class Services:
    """Everything a route needs, built once at start-up."""

    ledger: MemoryLedger
    reads: Reads
    metrics: Metrics
    jwt_secret: str
    worker: ProjectionWorker | None = None
    read_timeout: float = 5.0
    access_log: AccessLog | None = None
    """Where agent reads, searches and denials are recorded for audit (None: not recorded)."""
    search_cache: QueryCache[SearchKey, Found] | None = None
    """The short-TTL search cache of section 16 (None: off)."""
    embeddings: EmbeddingService | None = None
    """The embedder for hybrid search (None, or one without embedder: lexical only)."""
    embedding_worker: ProjectionWorker | None = None
    """The embeddings projection's own worker (its lag is reported; reads never wait for it)."""
    _written: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wrote(self, user_id: str, outcome: Outcome) -> Outcome:
        """Remember the position of a user's write, so their next reads wait for it."""
        if outcome.position:
            with self._lock:
                self._written[user_id] = max(self._written.get(user_id, 0), outcome.position)
        return outcome

    def record_read(
        self,
        user_id: str,
        via: str,
        rows: Iterable[Mapping[str, Any]],
        *,
        workspace: str | None = None,
    ) -> None:
        """Record for audit (`memory.read`) which memories a read returned, in order, by id.

        `via` names the tool or management endpoint (`api.get_memory`, …); rows need
        memory_id, scope_type, workspace_type and revision. Queued, never awaited.
        """
        if self.access_log is None:
            return
        hits = [
            AccessHit(r["memory_id"], r["scope_type"], r["workspace_type"], r.get("revision"))
            for r in rows
        ]
        self.access_log.read(user_id, via, workspace, hits)

    def close(self) -> None:
        """At shutdown: write the access records still queued."""
        if self.access_log is not None:
            self.access_log.close()

    def wait_for(self, user_id: str, at_least: int = 0) -> None:
        """Wait (bounded) until projections show this user's writes (read-your-writes).

        Only `worker`'s projections are waited for, not the embeddings: search ranks a memory
        without a vector lexically, and never scores a forgotten one (see retrieval/hybrid.py).

        When they do not catch up in time the read is refused with 503 rather than served
        stale: a stale read could show a memory its owner has just forgotten.
        """
        with self._lock:
            position = max(self._written.get(user_id, 0), at_least)
        if not position or self.worker is None:
            return
        if not self.worker.wait(position, timeout=self.read_timeout):
            _log.warning(
                "projections did not reach position %s in %.1fs",
                position,
                self.read_timeout,
                extra={"user_id": user_id},
            )
            raise LedgerUnavailable(f"projections are behind position {position}; retry")


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]


_bearer = HTTPBearer(
    scheme_name="bearer",
    bearerFormat="JWT",
    description="An HS256 JWT: `sub` is the user; `roles`, `workspace`, `mode` and `tools` "
    "as API_CONTRACT.md says (`memledger token` mints one in development).",
    auto_error=False,  # no or another scheme: our own 401 body, not the library's
)


def _identity(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise InvalidToken("no bearer token")
    identity = verify_token(token, services.jwt_secret)
    request.scope.setdefault("state", {})["user_id"] = identity.user_id
    return identity


CurrentIdentity = Annotated[Identity, Depends(_identity)]


def fresh_reads(
    identity: CurrentIdentity,
    services: ServicesDep,
    min_position: Annotated[
        int | None,
        Header(alias="X-Min-Position", ge=0, description="wait for this ledger position"),
    ] = None,
) -> Reads:
    """Projection reads that already include the caller's own earlier writes."""
    # A position the ledger has not reached yet cannot be waited for: cap it at the head.
    at_least = min(min_position, services.ledger.position()) if min_position else 0
    services.wait_for(identity.user_id, at_least)
    return services.reads


FreshReads = Annotated[Reads, Depends(fresh_reads)]
