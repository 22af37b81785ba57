"""`memledger token`: a signed bearer token for development and tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Final

import typer

from api.cli.common import EXIT_BAD_INPUT, load_settings

__all__ = ["token"]

DEFAULT_TTL: Final = timedelta(hours=12)


def token(
    user: Annotated[str, typer.Option(help="the user_id (the token's `sub`)")],
    workspace: Annotated[
        str | None, typer.Option(help="learning, teaching or research (needed by /tools/*)")
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
    """Print a signed HS256 bearer token (stdout: the token only) for development and tests."""
    from api.bootstrap import jwt_secret
    from api.deps import MODES, mint_token
    from domain.ledger.keyring import KeyringError

    workspaces = ("learning", "teaching", "research")
    problems = []
    if not user.strip() or len(user) > 200:
        problems.append("--user must be a non-empty user id of at most 200 characters")
    if workspace is not None and workspace not in workspaces:
        problems.append(f"--workspace must be one of {', '.join(workspaces)}, not {workspace!r}")
    if mode is not None and mode not in MODES:
        problems.append(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    for name in [*(role or []), *(tool or [])]:
        if not name.strip():
            problems.append("--role and --tool values must not be empty")
            break
    if problems:
        for problem in problems:
            typer.echo(f"memledger token: {problem}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    settings = load_settings()
    longest = timedelta(seconds=settings.max_token_lifetime)
    ttl = min(DEFAULT_TTL, longest) if ttl_hours is None else timedelta(hours=ttl_hours)
    if ttl > longest:
        typer.echo(
            f"memledger token: --ttl-hours must be at most {longest / timedelta(hours=1):g}, the"
            " service's maximum token lifetime (MEMLEDGER_MAX_TOKEN_LIFETIME, in seconds)",
            err=True,
        )
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        secret = jwt_secret(settings)
    except KeyringError as error:
        typer.echo(f"memledger token: {error}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    unknown = sorted(set(role or []) - {"auditor", "admin"})
    if unknown:
        typer.echo(f"memledger token: note, roles not used by memledger: {unknown}", err=True)
    typer.echo(
        mint_token(
            secret,
            user,
            workspace=workspace,
            mode=mode,
            roles=list(dict.fromkeys(role or [])),
            tools=list(dict.fromkeys(tool)) if tool else None,
            ttl=ttl,
        )
    )
