"""What the use cases need from the composition root (api/bootstrap.py builds it once).

Structural types only: the API's `Services` container satisfies `Ports` without this layer
importing it, so a use case never depends on the door that calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Literal, Protocol
from uuid import UUID

from prometheus_client import Counter, Histogram

from domain.ledger.access import AccessHit
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import Outcome
from projections.reads import Reads
from retrieval.owner import OwnerSearch
from retrieval.search import MemorySearch

__all__ = ["AccessRecords", "Limits", "Ports", "Shown", "UseCaseMetrics"]


class Shown(Protocol):
    """What an access record keeps of a memory a read returned (a `MemoryRow`, an `AccessHit`)."""

    @property
    def memory_id(self) -> UUID: ...
    @property
    def scope_type(self) -> str: ...
    @property
    def workspace_type(self) -> str | None: ...
    @property
    def revision(self) -> int | None: ...


class AccessRecords(Protocol):
    """The audit trail of agent reads (section 17): queued, written in the background."""

    def searched(
        self, user_id: str, tool: str, workspace: str, hits: Sequence[AccessHit]
    ) -> None: ...

    def denied(self, user_id: str, tool: str, workspace: str | None, reason: str) -> None: ...


class Limits(Protocol):
    """Per-user concurrency: `hold` raises at once when the user has no free slot."""

    def hold(
        self, user: str, kind: Literal["request", "search", "stream"] = "request"
    ) -> AbstractContextManager[None]: ...


class UseCaseMetrics(Protocol):
    """The metrics a use case records (section 17)."""

    @property
    def tool_latency(self) -> Histogram: ...
    @property
    def denials(self) -> Counter: ...
    @property
    def searches(self) -> Counter: ...
    @property
    def search_items(self) -> Histogram: ...
    @property
    def search_tokens(self) -> Histogram: ...
    @property
    def corrections(self) -> Counter: ...
    @property
    def candidates(self) -> Counter: ...


class Ports(Protocol):
    """The ledger, its read models, search, audit, metrics and read-your-writes positions."""

    @property
    def ledger(self) -> MemoryLedger: ...
    @property
    def reads(self) -> Reads: ...
    @property
    def search(self) -> MemorySearch | None: ...
    @property
    def owner_search(self) -> OwnerSearch | None: ...
    @property
    def access_log(self) -> AccessRecords | None: ...
    @property
    def metrics(self) -> UseCaseMetrics: ...
    @property
    def limits(self) -> Limits: ...

    def wrote(self, user_id: str, outcome: Outcome) -> Outcome:
        """Remember a write's position for the user's next reads; answer it as X-Position."""
        ...

    def record_read(
        self,
        user_id: str,
        via: str,
        rows: Iterable[Shown],
        *,
        workspace: str | None = None,
    ) -> None:
        """Record for audit (`memory.read`) which memories a read returned."""
        ...

    def wait_for(
        self, user_id: str, at_least: int = 0, projections: Sequence[str] | None = None
    ) -> None:
        """Wait (bounded) until these projections show the user's writes; else unavailable."""
        ...

    def wait_for_ledger(self, projections: Sequence[str]) -> None:
        """Wait (bounded) until these projections show every event committed before the
        call, in every partition; else unavailable."""
        ...
