"""`memledger token`: a signed bearer token for development and tests.

Its options are held to the server's own rules before it signs (`api.tokens.check_claims`, the
claims half of `verify_token`; tool names from the tool specs): a token it prints is one the
server accepts, and a value it would refuse exits 2 with the option and the rule.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Final

import typer

from api.cli.common import fail, load_settings
from domain.model.values import WORKSPACES

__all__ = ["token"]

DEFAULT_TTL: Final = timedelta(hours=12)
_OPTIONS: Final = {
    "sub": "--user",
    "roles": "--role",
    "workspace": "--workspace",
    "mode": "--mode",
    "tools": "--tool",
}
"""Each claim's option, to name it in errors."""
_ROLES: Final = ("auditor", "admin")
_WORKSPACES: Final = f"{', '.join(WORKSPACES[:-1])} or {WORKSPACES[-1]}"


def token(
    user: Annotated[str, typer.Option(help="the user_id (the token's `sub`)")],
    workspace: Annotated[
        str | None, typer.Option(help=f"{_WORKSPACES} (needed by /tools/*)")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="normal, no_write or isolated")] = None,
    role: Annotated[
        list[str] | None, typer.Option(help="a role, e.g. auditor or admin (repeatable)")
    ] = None,
    tool: Annotated[
        list[str] | None, typer.Option(help="a tool this turn may call (repeatable; none: all)")
    ] = None,
    ttl_hours: Annotated[
        float | None,
        typer.Option(
            min=0.001,
            help="hours until the token expires (default: 12, or the service's maximum token"
            " lifetime if shorter; longer than that maximum is refused)",
        ),
    ] = None,
) -> None:
    """Print a signed HS256 bearer token (stdout: the token only) for development and tests.

    Exit status 2, nothing printed on stdout, for a value the server would refuse.
    """
    from api.credentials import jwt_secret
    from api.tokens import mint_token

    roles = list(dict.fromkeys(role or []))
    tools = list(dict.fromkeys(tool)) if tool else None
    _check(user, workspace, mode, roles, tools)
    settings = load_settings()
    longest = timedelta(seconds=settings.max_token_lifetime)
    ttl = min(DEFAULT_TTL, longest) if ttl_hours is None else timedelta(hours=ttl_hours)
    if ttl > longest:
        fail(
            f"memledger token: --ttl-hours must be at most {longest / timedelta(hours=1):g}, the"
            " service's maximum token lifetime (MEMLEDGER_MAX_TOKEN_LIFETIME, in seconds)"
        )
    secret = jwt_secret(settings)  # none: KeyringError, exit 2 (api/cli/common.py)
    unknown = sorted(set(roles) - set(_ROLES))
    if unknown:
        typer.echo(f"memledger token: note, roles not used by memledger: {unknown}", err=True)
    typer.echo(
        mint_token(secret, user, workspace=workspace, mode=mode, roles=roles, tools=tools, ttl=ttl)
    )


def _check(
    user: str, workspace: str | None, mode: str | None, roles: list[str], tools: list[str] | None
) -> None:
    """Exit 2 naming the option when the server would refuse the token, or a tool is unknown."""
    from api.schemas.tools import tool_specs
    from api.tokens import InvalidToken, check_claims

    given: dict[str, Any] = {"sub": user, "workspace": workspace, "mode": mode, "roles": roles}
    given["tools"] = tools
    if any(not name.strip() for name in [*roles, *(tools or [])]):
        fail("memledger token: --role and --tool values must not be empty")
    try:
        check_claims({claim: value for claim, value in given.items() if value is not None})
    except InvalidToken as error:
        option = _OPTIONS.get(error.claim or "", error.claim)
        value = given.get(error.claim or "")
        shown = ", ".join(map(repr, value)) if isinstance(value, list) else repr(value)
        fail(f"memledger token: {option} {error.rule}, not {shown}")
    known = [spec.name for spec in tool_specs()]
    unknown = [name for name in tools or [] if name not in known]
    if unknown:
        fail(
            f"memledger token: --tool must name one of the tools ({', '.join(known)}),"
            f" not {', '.join(map(repr, unknown))}"
        )
