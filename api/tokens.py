"""Bearer tokens: verify an HS256 JWT into the caller's `Identity`, and mint one (dev, tests)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import jwt

from domain.errors import InvalidInput
from domain.model.values import WORKSPACES, check_id
from service.caller import Identity

__all__ = [
    "MAX_TOKEN_LIFETIME",
    "MODES",
    "NAMES_RULE",
    "Identity",
    "InvalidToken",
    "check_claims",
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
