"""The embedder as the service uses it: failures contained, query vectors cached, state known.

`EmbeddingService` wraps the configured `Embedder` (or none). A failure (the model does not
load, the endpoint is down) never reaches a caller: passages and queries come back as None,
search falls back to lexical ranking, the projection stores the memory without a vector, and
the embedder is not tried again for `retry_after` seconds. `state()` is what /readyz and
/metrics report. Query vectors are cached in memory only (LRU), keyed by the normalised query
(the form the search cache keys on), and so are the users' vector matrices (`matrices`, see
retrieval/vectors/matrix_cache.py); nothing here is written anywhere.

A query's work is bounded: only its first `query_chars` characters are embedded (`capped`),
and the embedding runs on the fair queue of retrieval/vectors/queue.py within `query_budget`
seconds (and the request's deadline); past them the caller gets None, so the search answers
lexically, and the timeout is counted (`EmbeddingState.query_timeouts`) and logged. A user past
their share of a busy queue gets None at once (`query_over_share`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol
from uuid import UUID

import numpy as np

from domain import context
from domain.model.values import normalise_content
from projections.views.vectors import (
    DTYPE,
    Vectors,
    from_bytes,
    normalised,
    passage_text,
    to_bytes,
)
from retrieval.vectors.background import background, hubness
from retrieval.vectors.matrix_cache import DEFAULT_MAX_BYTES, MatrixCache
from retrieval.vectors.queue import FairQueue, OverShare

__all__ = [
    "DTYPE",
    "QUERY_CHARS",
    "Embedder",
    "EmbedderError",
    "EmbeddingService",
    "EmbeddingState",
    "Vectors",
    "capped",
    "from_bytes",
    "normalised",
    "passage_text",
    "to_bytes",
]


class EmbedderError(RuntimeError):
    """The embedder cannot be loaded or did not answer; search falls back to lexical."""


class Embedder(Protocol):
    """Turns text into unit vectors; deterministic for equal input (a rebuild compares rows)."""

    model_id: str
    """Names the vector space: vectors of different `model_id`s are never compared."""

    def passages(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per memory text, shape (len(texts), dim)."""
        ...

    def query(self, text: str) -> Vectors:
        """The unit vector of a search query, shape (dim,)."""
        ...


_log = logging.getLogger(__name__)
DEFAULT_QUERY_CACHE: Final = 2048
QUERY_CHARS: Final = 100
"""Characters of a query that are embedded (MEMLEDGER_QUERY_EMBED_CHARS). e5's tokeniser makes
about one token of a CJK character and of three to four Latin ones, so this is at most about
105 tokens with the `query: ` prefix: a fifth of e5-small's 512, a seventh of the model time of
a 500-character Chinese query, and above every query of the evaluation sets (1,135, the longest
68 characters and 22 tokens), whose recall it therefore leaves as it was. The lexical part of a
search still reads the whole query."""


def _none() -> None:
    return None


def capped(text: str, chars: int) -> str:
    """The first `chars` characters of `text`, without a Latin word cut in two."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    if head[-1].isascii() and head[-1].isalnum() and text[chars].isalnum():
        space = head.rfind(" ")
        if space > chars // 2:
            head = head[:space]
    return head.rstrip()


@dataclass(frozen=True, slots=True)
class EmbeddingState:
    """What /readyz and /metrics say about embeddings."""

    model_id: str | None
    """The configured embedder's vector space; None when embeddings are off."""
    available: bool
    """False when off or failing: search is lexical only (degraded)."""
    error: str | None
    passages: int
    passage_seconds: float
    queries: int
    query_cache_hits: int
    failures: int
    query_timeouts: int = 0
    """Query embeddings not done within their budget: those searches were lexical."""
    queries_capped: int = 0
    """Queries longer than `query_chars`, of which only the first characters were embedded."""
    query_over_share: int = 0
    """Queries of users past their share of a busy queue: those searches were lexical."""


class EmbeddingService:
    """A thread-safe front of one embedder (or of none: `EmbeddingService(None)`)."""

    def __init__(
        self,
        embedder: Embedder | None,
        *,
        query_cache: int = DEFAULT_QUERY_CACHE,
        retry_after: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        matrix_bytes: int = DEFAULT_MAX_BYTES,
        query_chars: int = QUERY_CHARS,
        query_budget: float | None = None,
        query_queue: FairQueue | None = None,
        background_cache: Path | None = None,
    ) -> None:
        if query_chars < 1 or (query_budget is not None and query_budget <= 0):
            raise ValueError("query_chars must be at least 1 and query_budget positive")
        self.embedder = embedder
        self.query_chars = query_chars
        """Only this many characters of a query are embedded (`capped`)."""
        self.query_budget = query_budget
        """Seconds a search waits for its query's vector (None: as long as the request may)."""
        self.background_cache = background_cache
        """Where the hubness background's vectors are kept between starts (None: nowhere)."""
        self.queue = query_queue if query_queue is not None else FairQueue()
        """Where query embeddings run, fairly across users (retrieval/vectors/queue.py)."""
        self.matrices = MatrixCache(matrix_bytes)
        """Users' vector matrices for search, in memory (dropped when their vectors change)."""
        self.retry_after = retry_after
        self.clock = clock
        self._cache_size = max(0, query_cache)
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._error: str | None = None if embedder is not None else "no embedder configured"
        self._passages = self._queries = self._hits = self._failures = 0
        self._timeouts = self._capped = self._over_share = 0
        self._passage_seconds = 0.0
        self.dimension: int | None = None
        """The size of the query vectors seen so far (None before the first)."""

    @property
    def model_id(self) -> str | None:
        """The vector space of the configured embedder (None: off)."""
        return self.embedder.model_id if self.embedder is not None else None

    @property
    def available(self) -> bool:
        """An embedder is configured and not known to be failing right now."""
        return self.embedder is not None and self.clock() >= self._down_until

    def state(self) -> EmbeddingState:
        """A snapshot for /readyz and /metrics."""
        with self._lock:
            return EmbeddingState(
                self.model_id,
                self.available and self._error is None,
                self._error,
                self._passages,
                self._passage_seconds,
                self._queries,
                self._hits,
                self._failures,
                self._timeouts,
                self._capped,
                self._over_share,
            )

    def _failed(self, error: Exception) -> None:
        with self._lock:
            self._failures += 1
            self._error = str(error) if isinstance(error, EmbedderError) else type(error).__name__
            self._down_until = self.clock() + self.retry_after
        _log.warning("embedder %s failed, search is lexical only: %s", self.model_id, self._error)

    def _succeeded(self) -> None:
        if self._error is not None:
            with self._lock:
                self._error = None

    def warm_up(self) -> bool:
        """Load the model and embed the hubness background now (at start-up) rather than on
        first use; True if it works. Waits as long as that takes (no query budget), on the
        queue's thread.
        """
        embedder = self.embedder
        if not self.available or embedder is None:
            return False
        try:
            self.queue.submit(
                "", lambda: (embedder.query("warm up"), background(embedder, self.background_cache))
            ).result()
        except Exception as error:
            self._failed(error)
            return False
        self._succeeded()
        return True

    def hubness(self, vectors: Vectors) -> Vectors | None:
        """Each passage vector's (Latin, CJK) hubness (retrieval/vectors/background.py), shape
        (n, 2), or None when the embedder is off or fails to embed the background."""
        if not self.available or self.embedder is None:
            return None
        try:
            scripts = background(self.embedder, self.background_cache)
        except Exception as error:  # as a failing `passages`: the projection stores no vector
            self._failed(error)
            return None
        return hubness(np.asarray(vectors, dtype=DTYPE), scripts)

    def passages(self, texts: Sequence[str]) -> Vectors | None:
        """Vectors of memory texts, or None when the embedder is off or failed."""
        if not self.available or self.embedder is None:
            return None
        started = time.perf_counter()
        try:
            vectors = self.embedder.passages(texts)
        except Exception as error:  # a broken embedder must not break the projection
            self._failed(error)
            return None
        with self._lock:
            self._passages += len(texts)
            self._passage_seconds += time.perf_counter() - started
        self._succeeded()
        return vectors

    def query(self, text: str, *, normal: bool = False, user: str = "") -> Vectors | None:
        """The vector of a query (cached by its capped normalised form), or None when the
        embedder is unavailable or the vector is not ready within the budget.

        `normal`: `text` is already `normalise_content`'s form (`Query.normal`). `user`: whose
        search it is, for the fair queue.
        """
        return self.start_query(text, normal=normal, user=user)()

    def start_query(
        self, text: str, *, normal: bool = False, user: str = ""
    ) -> Callable[[], Vectors | None]:
        """`query`, begun now on the queue's thread: call the result for the vector (it waits
        at most what is left of the budget), so that the caller's other work (the lexical
        fetch, its matrix) runs while the query is embedded."""
        if not self.available or self.embedder is None:
            return _none
        normal_text = text if normal else normalise_content(text)
        capped_text = capped(normal_text, self.query_chars)
        with self._lock:
            self._queries += 1
            self._capped += capped_text != normal_text
            cached = self._cache.get(capped_text)
            if cached is not None:
                self._cache.move_to_end(capped_text)
                self._hits += 1
                return lambda: cached
        embedder = self.embedder

        def embed() -> Vectors:  # on the queue's thread, recorded before the caller hears
            try:
                vector = embedder.query(capped_text)
            except Exception as error:
                self._failed(error)
                raise
            self._succeeded()
            self.dimension = int(vector.shape[-1])
            self._remember(capped_text, vector)
            return vector

        try:
            job = self.queue.submit(user, embed)
        except OverShare:
            with self._lock:
                self._over_share += 1
            return _none
        budget = self._budget()
        deadline = None if budget is None else time.monotonic() + budget

        def wait() -> Vectors | None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                vector = job.result(timeout=left)
            except FutureTimeout:
                job.cancel()  # dropped if it has not started; else it finishes into the cache
                with self._lock:
                    self._timeouts += 1
                _log.warning(
                    "query embedding not done within %.2fs: lexical search",
                    budget,
                    extra={"user_id": user or None, "request_id": context.current_request_id()},
                )
                return None
            except Exception:  # the embedder failed (recorded by embed): lexical search
                return None
            return vector

        return wait

    def _budget(self) -> float | None:
        left = context.remaining()
        if left is None:
            return self.query_budget
        return max(0.0, left if self.query_budget is None else min(self.query_budget, left))

    def _remember(self, cache_key: str, vector: Vectors) -> None:
        if self._cache_size:
            with self._lock:
                self._cache[cache_key] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)

    def vectors_forgotten(self, schema: str, forgotten: Mapping[str, set[UUID]]) -> None:
        """These memories were forgotten (user -> ids): their rows leave the cached matrices
        now (the embeddings view calls it)."""
        self.matrices.forget(schema, forgotten)

    def close(self) -> None:
        """At shutdown: end the query queue's threads (the queue is this service's, whoever
        made it); a closed service embeds no more queries."""
        self.queue.close()

    def clear_cache(self) -> None:
        """Forget every cached query vector."""
        with self._lock:
            self._cache.clear()
