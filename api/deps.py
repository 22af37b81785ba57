"""Request dependencies: the verified identity, the services, and read-your-writes waits."""

from __future__ import annotations

import functools
import inspect
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final

import jwt
from fastapi import Depends, Header, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.access_log import AccessLog
from api.limits import UserLimits
from api.metrics import Metrics
from api.middleware import note_position
from domain import context
from domain.errors import InvalidInput, LedgerUnavailable, PolicyDenied
from domain.ledger.access import AccessHit
from domain.ledger.ledger import MemoryLedger
from domain.ledger.results import Outcome
from domain.model.values import WORKSPACES, check_id
from projections.reads import Reads
from projections.views.active_memories import ActiveMemories
from projections.views.audit_log import AuditLog
from projections.views.candidates import Candidates
from projections.views.memory_versions import MemoryVersions
from projections.views.search_terms import SearchTerms
from projections.views.tombstones import Tombstones
from projections.views.user_revisions import UserRevisions
from projections.worker import ProjectionWorker
from retrieval.cache import QueryCache, SearchKey
from retrieval.hybrid import HybridSource
from retrieval.search import Found, MemorySearch
from retrieval.vectors.service import EmbeddingService

__all__ = [
    "MAX_TOKEN_LIFETIME",
    "MODES",
    "NAMES_RULE",
    "ActiveMemoryReads",
    "CandidateReads",
    "CurrentIdentity",
    "Identity",
    "InvalidToken",
    "MemoryReads",
    "SearchReads",
    "Services",
    "ServicesDep",
    "UserRoute",
    "VersionReads",
    "VisibilityReads",
    "check_claims",
    "fresh_reads",
    "mint_token",
    "verify_token",
]

MODES: Final = ("normal", "no_write", "isolated")
MAX_NAMES: Final = 64
MAX_TOKEN_LIFETIME: Final = 24 * 3600.0
"""Seconds a token's `exp` may lie ahead of now, by default (MEMLEDGER_MAX_TOKEN_LIFETIME)."""
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")  # a role or a tool name
NAMES_RULE: Final = (
    f"must be a list of at most {MAX_NAMES} names of 1 to 64 ASCII letters, digits and . _ : -,"
    " each starting with a letter or digit"
)


class InvalidToken(Exception):
    """Missing, malformed, expired or wrongly signed token (HTTP 401); `claim` names the
    claim that breaks a rule, when one does."""

    def __init__(self, message: str, *, claim: str | None = None, rule: str = "") -> None:
        super().__init__(message)
        self.claim = claim
        self.rule = rule

    @classmethod
    def breaking(cls, claim: str, rule: str) -> InvalidToken:
        """The claim breaks the rule: "<claim> <rule>"."""
        return cls(f"{claim} {rule}", claim=claim, rule=rule)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling, from where and with what: the token's claims, checked."""

    user_id: str
    roles: frozenset[str] = frozenset()
    workspace: str | None = None
    mode: str = "normal"
    tools: frozenset[str] | None = None
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_agent_turn(self) -> bool:
        """A token of one agent turn (mode no_write/isolated, or a tools list): tools only."""
        return self.mode != "normal" or self.tools is not None


def verify_token(token: str, secret: str, max_lifetime: float = MAX_TOKEN_LIFETIME) -> Identity:
    """Check signature, expiry and claim shapes; raise InvalidToken on any problem.

    `exp` is required: a number (a string the library would accept is refused) at most
    `max_lifetime` seconds ahead, so no token outlives the service's maximum lifetime.
    """
    try:
        claims = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            options={"require": ["sub", "exp"], "verify_aud": False},
        )
    except jwt.PyJWTError as error:
        raise InvalidToken(str(error)) from None
    exp = claims["exp"]
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise InvalidToken("exp must be a number (seconds since the epoch)")
    if exp > datetime.now(UTC).timestamp() + max_lifetime:
        raise InvalidToken(
            f"exp is further ahead than the maximum token lifetime ({max_lifetime:g} s)"
        )
    return check_claims(claims)


def check_claims(claims: dict[str, Any]) -> Identity:
    """The identity a token's claims name (`sub`, `roles`, `workspace`, `mode`, `tools`), held
    to the rules every token is: InvalidToken naming the claim and the rule otherwise.

    Signature and `exp` aside, this is the whole of `verify_token`; `memledger token` applies
    it before it signs, so it never mints a token this server refuses.
    """
    sub: Any = claims.get("sub")
    roles, workspace = claims.get("roles", []), claims.get("workspace")
    mode, tools = claims.get("mode", "normal"), claims.get("tools")
    try:
        check_id("sub", sub)
    except InvalidInput as error:
        raise InvalidToken.breaking("sub", error.message) from None
    if not _names(roles):
        raise InvalidToken.breaking("roles", NAMES_RULE)
    if workspace is not None and (not isinstance(workspace, str) or workspace not in WORKSPACES):
        raise InvalidToken.breaking("workspace", f"must be one of {', '.join(WORKSPACES)}")
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidToken.breaking("mode", f"must be one of {', '.join(MODES)}")
    if tools is not None and not _names(tools):
        raise InvalidToken.breaking("tools", NAMES_RULE)
    return Identity(
        user_id=sub,
        roles=frozenset(roles),
        workspace=workspace,
        mode=mode,
        tools=None if tools is None else frozenset(tools),
        claims=claims,
    )


def _names(value: Any) -> bool:
    """A list of at most MAX_NAMES role or tool names, each matching _NAME."""
    return (
        isinstance(value, list)
        and len(value) <= MAX_NAMES
        and all(isinstance(v, str) and _NAME.fullmatch(v) for v in value)
    )


def mint_token(
    secret: str,
    user_id: str,
    *,
    workspace: str | None = None,
    mode: str | None = None,
    roles: list[str] | None = None,
    tools: list[str] | None = None,
    ttl: timedelta = timedelta(hours=12),
) -> str:
    """A signed token for development and tests (`memledger token`)."""
    claims: dict[str, Any] = {"sub": user_id, "exp": datetime.now(UTC) + ttl}
    if workspace:
        claims["workspace"] = workspace
    if mode:
        claims["mode"] = mode
    if roles:
        claims["roles"] = roles
    if tools is not None:
        claims["tools"] = tools
    return jwt.encode(claims, secret, algorithm="HS256")


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
    _written: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.search is None:
            vectors = HybridSource(self.embeddings) if self.embeddings is not None else None
            self.search = MemorySearch(self.search_cache, vectors=vectors)

    def wrote(self, user_id: str, outcome: Outcome) -> Outcome:
        """Remember the position of a user's write, so their next reads wait for it, and
        answer it as the request's `X-Position`. Every write route calls this, those that
        appended nothing (unchanged, duplicate) too: their position is the ledger head."""
        if outcome.position:
            with self._lock:
                self._written[user_id] = max(self._written.get(user_id, 0), outcome.position)
        note_position(outcome.position or self.ledger.position())
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
) -> Iterator[Identity]:
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise InvalidToken("no bearer token")
    identity = verify_token(token, services.jwt_secret, services.max_token_lifetime)
    request.scope.setdefault("state", {})["user_id"] = identity.user_id
    with services.limits.hold(identity.user_id):  # UserBusy: 429 (api/limits.py)
        yield identity


CurrentIdentity = Annotated[Identity, Depends(_identity, scope="function")]
"""The caller, verified; the request holds one of the caller's slots while its route runs."""


def fresh_reads(*projections: str) -> Callable[..., Reads]:
    """A dependency giving reads that include the caller's own earlier writes (and any
    `X-Min-Position`) in these projections, the ones the route reads; it waits for no other."""

    def dependency(
        identity: CurrentIdentity,
        services: ServicesDep,
        min_position: Annotated[
            int | None,
            Header(alias="X-Min-Position", ge=0, description="wait for this ledger position"),
        ] = None,
    ) -> Reads:
        # A position the ledger has not reached yet cannot be waited for: cap it at the head.
        at_least = min(min_position, services.ledger.position()) if min_position else 0
        services.wait_for(identity.user_id, at_least, projections)
        return services.reads

    return dependency


# What each read path reads, so it waits for these projections alone.
ActiveMemoryReads = Annotated[Reads, Depends(fresh_reads(ActiveMemories.name))]
"""Listing memories, or one by key: active_memories."""
MemoryReads = Annotated[Reads, Depends(fresh_reads(ActiveMemories.name, Tombstones.name))]
"""One memory by id (a forgotten one answers 410): active_memories, tombstones."""
VersionReads = Annotated[
    Reads, Depends(fresh_reads(ActiveMemories.name, Tombstones.name, MemoryVersions.name))
]
"""A memory's versions: active_memories, tombstones, memory_versions."""
CandidateReads = Annotated[Reads, Depends(fresh_reads(Candidates.name))]
"""Candidates: candidates."""
SearchReads = Annotated[
    Reads, Depends(fresh_reads(SearchTerms.name, UserRevisions.name, ActiveMemories.name))
]
"""Search: search_terms, with user_revisions and active_memories for its cache."""
VisibilityReads = Annotated[Reads, Depends(fresh_reads(AuditLog.name))]
"""The tools' check of a memory by id: audit_log (a forgotten memory's scope)."""


class UserRoute(APIRoute):
    """A route of the user's own APIs (/me/*, /audit/*): refused to agent-turn tokens.

    An agent turn (mode no_write or isolated, or a tools list) acts only through the tools, so
    a mode can never be widened through the management API: 403 `agent_token`. The check wraps
    the endpoint, so it runs after identity (401) and request validation (422), as the
    contract orders them; every endpoint of such a router takes `identity: CurrentIdentity`.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _refusing_agent_turns(endpoint), **kwargs)


def _refusing_agent_turns(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    if "identity" not in inspect.signature(endpoint).parameters or inspect.iscoroutinefunction(
        endpoint
    ):
        raise TypeError(f"{endpoint.__name__}: a UserRoute endpoint is sync and takes `identity`")

    @functools.wraps(endpoint)
    def checked(*args: Any, **kwargs: Any) -> Any:
        identity: Identity = kwargs["identity"]
        if identity.is_agent_turn:
            raise PolicyDenied(
                "agent_token", "an agent turn's token acts only through the agent tools"
            )
        return endpoint(*args, **kwargs)

    return checked
