"""Identity from a verified HS256 bearer token; nothing in a request body can widen it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import jwt

from domain.errors import InvalidInput
from domain.model.values import check_id

__all__ = ["MODES", "Identity", "InvalidToken", "mint_token", "verify_token"]

MODES: Final = ("normal", "no_write", "isolated")
MAX_NAMES: Final = 64
_WORKSPACES: Final = ("learning", "teaching", "research")
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")  # a role or a tool name


class InvalidToken(Exception):
    """Missing, malformed, expired or wrongly signed token (HTTP 401)."""


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


def verify_token(token: str, secret: str) -> Identity:
    """Check signature, expiry and claim shapes; raise InvalidToken on any problem."""
    try:
        claims = jwt.decode(
            token, secret, algorithms=["HS256"], options={"require": ["sub"], "verify_aud": False}
        )
    except jwt.PyJWTError as error:
        raise InvalidToken(str(error)) from None
    sub, roles, workspace = claims.get("sub"), claims.get("roles", []), claims.get("workspace")
    mode, tools = claims.get("mode", "normal"), claims.get("tools")
    try:
        check_id("sub", sub)
    except InvalidInput:
        raise InvalidToken("sub must be a user id matching ID_PATTERN") from None
    if not _names(roles):
        raise InvalidToken("roles must be a list of role names")
    if workspace is not None and (not isinstance(workspace, str) or workspace not in _WORKSPACES):
        raise InvalidToken("workspace must be learning, teaching or research")
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidToken("mode must be normal, no_write or isolated")
    if tools is not None and not _names(tools):
        raise InvalidToken("tools must be a list of tool names")
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
