"""Prometheus metrics of section 17, one registry per app (so tests and apps never collide)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from api.access_log import AccessLogState
from retrieval.rerank import RerankState
from retrieval.vectors.service import EmbeddingState

__all__ = ["Metrics", "StateCollector"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """Counters and latency histograms; never labelled with user ids or content."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "memledger_http_requests", "HTTP requests", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "memledger_http_request_seconds",
            "HTTP request latency, by route template (never the raw path) and status",
            ["route", "method", "status"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tool_latency = Histogram(
            "memledger_tool_seconds",
            "agent tool call latency",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.searches = Counter("memledger_searches", "memory searches", ["outcome"], registry=r)
        self.search_items = Histogram(
            "memledger_search_items",
            "items returned per search",
            buckets=(0, 1, 2, 3, 5, 10, 20),
            registry=r,
        )
        self.search_tokens = Histogram(
            "memledger_search_tokens",
            "tokens returned per search",
            buckets=(0, 50, 100, 200, 400, 600),
            registry=r,
        )
        self.candidates = Counter(
            "memledger_candidates", "candidate decisions", ["decision"], registry=r
        )
        self.conflicts = Counter("memledger_conflicts", "409 answers", ["reason"], registry=r)
        self.limited = Counter(
            "memledger_user_limited",
            "429 answers: a user at a per-user concurrency limit, by kind (request, search)",
            ["kind"],
            registry=r,
        )
        self.corrections = Counter(
            "memledger_corrections", "user corrections of memories", registry=r
        )
        self._watched: Collector | None = None
        self.denials = Counter(
            "memledger_policy_denials", "403 answers by reason", ["reason"], registry=r
        )

    def watch(self, collector: Collector) -> None:
        """Add the scrape-time gauges (once: an app rebuilt on the same services replaces it)."""
        if self._watched is not None:
            self.registry.unregister(self._watched)
        self.registry.register(collector)
        self._watched = collector


class StateCollector(Collector):
    """Gauges read at scrape time: projection lag and quarantined events, expired memories
    still stored."""

    def __init__(
        self,
        lags: Callable[[], Mapping[str, int]],
        expired: Callable[[], int],
        embeddings: Callable[[], EmbeddingState | None] = lambda: None,
        unembedded: Callable[[str | None], int] = lambda model: 0,
        quarantined: Callable[[], Mapping[str, int]] = dict,
        reranker: Callable[[], RerankState | None] = lambda: None,
        access: Callable[[], AccessLogState | None] = lambda: None,
    ) -> None:
        self._lags = lags
        self._quarantined = quarantined
        self._expired = expired
        self._embeddings = embeddings
        self._unembedded = unembedded
        self._reranker = reranker
        self._access = access

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        lag = GaugeMetricFamily(
            "memledger_projection_lag", "ledger events not yet projected", labels=["projection"]
        )
        for name, value in self._lags().items():
            lag.add_metric([name], value)
        yield lag
        held = GaugeMetricFamily(
            "memledger_projection_quarantined_events",
            "ledger events a projection could not apply and set aside (see `memledger projections"
            " quarantine`)",
            labels=["projection"],
        )
        for name, value in self._quarantined().items():
            held.add_metric([name], value)
        yield held
        yield GaugeMetricFamily(
            "memledger_expired_memories",
            "memories past expires_at (no longer retrieved)",
            value=self._expired(),
        )
        yield from _embedding_metrics(self._embeddings(), self._unembedded)
        yield from _reranker_metrics(self._reranker())
        yield from _access_metrics(self._access())


def _embedding_metrics(
    state: EmbeddingState | None, unembedded: Callable[[str | None], int]
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Whether hybrid search is on (0: lexical only, degraded), and how the embedder fares."""
    model = state.model_id if state is not None else None
    available = GaugeMetricFamily(
        "memledger_embedder_available",
        "1 when search is hybrid; 0 when it fell back to lexical (no embedder, or failing)",
        labels=["model"],
    )
    available.add_metric([model or "none"], float(state is not None and state.available))
    yield available
    yield GaugeMetricFamily(
        "memledger_memories_without_vector",
        "live memories without a vector of the current model (ranked lexically only)",
        value=unembedded(model),
    )
    if state is None:
        return
    yield CounterMetricFamily(
        "memledger_embedded_passages", "memory texts embedded", value=state.passages
    )
    yield CounterMetricFamily(
        "memledger_embedding_seconds",
        "time spent embedding memory texts",
        value=state.passage_seconds,
    )
    yield CounterMetricFamily(
        "memledger_query_embeddings",
        "search queries embedded or found in the cache",
        value=state.queries,
    )
    yield CounterMetricFamily(
        "memledger_query_embedding_cache_hits",
        "query vectors served from the cache",
        value=state.query_cache_hits,
    )
    yield CounterMetricFamily(
        "memledger_embedder_failures", "embedder calls that failed", value=state.failures
    )
    yield CounterMetricFamily(
        "memledger_query_embedding_timeouts",
        "query embeddings not done within MEMLEDGER_QUERY_EMBED_BUDGET: searches answered"
        " lexically (degraded)",
        value=state.query_timeouts,
    )
    yield CounterMetricFamily(
        "memledger_query_embeddings_capped",
        "queries longer than MEMLEDGER_QUERY_EMBED_CHARS (only their start was embedded)",
        value=state.queries_capped,
    )
    yield CounterMetricFamily(
        "memledger_query_embeddings_over_share",
        "queries of users past MEMLEDGER_QUERY_EMBED_SHARE while the queue was busy: searches"
        " answered lexically",
        value=state.query_over_share,
    )


def _access_metrics(
    state: AccessLogState | None,
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The access audit's writer (api/access_log.py): records written, dropped, waiting."""
    if state is None:
        return
    yield CounterMetricFamily(
        "memledger_access_records_written",
        "access audit records (reads, searches, denials) appended to the ledger",
        value=state.written,
    )
    yield CounterMetricFamily(
        "memledger_access_records_dropped",
        "access audit records lost: the queue was full, or the ledger refused a batch past its"
        " retries (each also logged as an error)",
        value=state.dropped,
    )
    yield GaugeMetricFamily(
        "memledger_access_records_pending",
        "access audit records queued and not yet in the ledger",
        value=state.pending,
    )


def _reranker_metrics(
    state: RerankState | None,
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """How the reranker stage fares (nothing when it is off)."""
    if state is None:
        return
    available = GaugeMetricFamily(
        "memledger_reranker_available",
        "1 while the reranker answers; 0 while it is failing (searches keep the fused order)",
        labels=["model"],
    )
    available.add_metric([state.name], float(state.available))
    yield available
    outcomes = CounterMetricFamily(
        "memledger_reranks",
        "searches by what the reranker stage did: applied (its order), timeout (no answer within"
        " MEMLEDGER_RERANKER_BUDGET_MS), error (failed or answered what cannot be trusted),"
        " skipped (it failed in the last 30 s); all but applied keep the fused order",
        labels=["outcome"],
    )
    for outcome, value in (
        ("applied", state.applied),
        ("timeout", state.timeouts),
        ("error", state.errors),
        ("skipped", state.skipped),
    ):
        outcomes.add_metric([outcome], value)
    yield outcomes
    yield CounterMetricFamily(
        "memledger_rerank_seconds",
        "time searches spent waiting for the reranker, whatever the outcome",
        value=state.seconds,
    )
