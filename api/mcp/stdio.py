"""MCP over stdio (`memledger mcp`): one agent turn's token, the whole app in this process.

The token comes from MEMLEDGER_TOKEN and is checked before anything starts, and again at each
tool call (it may expire meanwhile: 401), which runs the tool's use case with it, exactly like
/mcp does with the token of each HTTP request. stdout carries the protocol only: logs go to
stderr.
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from mcp.server.stdio import stdio_server
from pydantic import SecretStr

from api.bootstrap import (
    build_embedding_worker,
    build_embeddings,
    build_ledger,
    build_reranker,
    build_services,
    build_worker,
    resolve_database_url,
    warm_search,
)
from api.credentials import jwt_secret
from api.mcp.server import Turn, tools_server
from api.middleware import configure_logging
from api.services import Services
from api.settings import Settings
from api.tokens import InvalidToken, verify_token
from domain.ledger.keyring import KeyringError

__all__ = ["run_stdio"]


def run_stdio(settings: Settings | None = None, *, worker: bool = True) -> int:
    """Serve the agent tools over stdin/stdout until the client closes them; the exit status.

    `worker`: run the projection workers in this process (as `memledger serve` does); without
    them another process must keep the projections up to date. A missing or invalid token, or
    missing keys, is said on stderr with status 2.
    """
    settings = settings or Settings()  # type: ignore[call-arg]  # from the environment
    try:
        secret = jwt_secret(settings)
        token = _token(settings, secret)
        settings = settings.model_copy(update={"jwt_secret": SecretStr(secret)})
        configure_logging()
        if threading.current_thread() is threading.main_thread():
            # The host's SIGTERM (after closing stdin) ends the process cleanly, as in `serve`.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with _services(settings, worker=worker) as services:
            anyio.run(_serve, services, token)
    except (KeyringError, InvalidToken) as error:
        print(f"memledger mcp: {error}", file=sys.stderr)
        return 2
    return 0


def _token(settings: Settings, secret: str) -> str:
    if settings.token is None or not settings.token.get_secret_value().strip():
        raise InvalidToken("MEMLEDGER_TOKEN (an agent-turn bearer token) is required")
    token = settings.token.get_secret_value().strip()
    try:
        verify_token(token, secret, settings.max_token_lifetime)
    except InvalidToken as error:
        raise InvalidToken(f"MEMLEDGER_TOKEN is not a valid token: {error}") from None
    return token


async def _serve(services: Services, token: str) -> None:
    identify = functools.partial(
        verify_token, token, services.jwt_secret, services.max_token_lifetime
    )
    server = tools_server(lambda _: Turn(services, identify))
    print("memledger: serving the agent tools on stdio", file=sys.stderr, flush=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


@contextmanager
def _services(settings: Settings, *, worker: bool) -> Iterator[Services]:
    """The services over the configured ledger, its workers running; all closed afterwards."""
    url = resolve_database_url(settings)
    ledger = build_ledger(settings, url)
    embeddings = build_embeddings(settings)
    reranker = build_reranker(settings)
    warm_search(embeddings, reranker)  # as `serve` does: the first search must not load them
    workers = (
        build_worker(settings, ledger, url, embeddings),
        build_embedding_worker(settings, ledger, url, embeddings),
    )
    services = build_services(
        settings, ledger, workers[0], embeddings, workers[1], reranker=reranker
    )
    try:
        if worker:
            for each in workers:
                each.start()
        yield services
    finally:
        services.close()  # the queued access records
        for each in reversed(workers):
            each.stop()
            each.pool.close()
        ledger.close()
        if embeddings is not None:
            embeddings.close()
