"""Request dependencies: the services, the verified caller, and reads that wait for the
caller's writes (read-your-writes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.services import Services
from api.tokens import InvalidToken, verify_token
from projections.reads import Reads
from projections.views.active_memories import ActiveMemories
from projections.views.candidates import Candidates
from projections.views.memory_versions import MemoryVersions
from projections.views.tombstones import Tombstones
from service import reading
from service.caller import Identity

__all__ = [
    "ActiveMemoryReads",
    "CandidateReads",
    "CurrentIdentity",
    "MemoryReads",
    "MinPosition",
    "ServicesDep",
    "VersionReads",
    "fresh_reads",
]


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


def _min_position(
    min_position: Annotated[
        int | None,
        Header(alias="X-Min-Position", ge=0, description="wait for this ledger position"),
    ] = None,
) -> int | None:
    return min_position


MinPosition = Annotated[int | None, Depends(_min_position)]
"""The request's `X-Min-Position`: its reads wait for this ledger position (capped at the head)."""


def fresh_reads(*projections: str) -> Callable[..., Reads]:
    """A dependency giving reads that include the caller's own earlier writes (and any
    `X-Min-Position`) in these projections, the ones the route reads; it waits for no other."""

    def dependency(
        identity: CurrentIdentity, services: ServicesDep, min_position: MinPosition
    ) -> Reads:
        return reading.fresh_reads(services, identity.user_id, min_position, *projections)

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
