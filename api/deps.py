"""Request dependencies: the services, the verified caller (holding one of its per-user slots)
and the `X-Min-Position` a use case's reads wait for (service/reading.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.services import Services
from api.tokens import InvalidToken, verify_token
from service import reading
from service.caller import Identity

__all__ = ["CurrentIdentity", "MinPosition", "ServicesDep"]


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
    identity: CurrentIdentity,
    services: ServicesDep,
    min_position: Annotated[
        str | None,
        Header(
            alias="X-Min-Position",
            max_length=40,
            description="wait for this ledger position (an `X-Position` this service answered)",
        ),
    ] = None,
) -> int | None:
    if min_position is None:
        return None
    return reading.min_position(services, identity.user_id, min_position)


MinPosition = Annotated[int | None, Depends(_min_position)]
"""The request's `X-Min-Position` as a ledger position (domain/ledger/positions.py): its reads
wait for it (capped at the head of the caller's partition)."""
