"""`memledger version` and `memledger serve`: the HTTP API with its projection workers."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import SecretStr

from api.cli.common import complete_shredding, dump_stacks_on_sigusr1, fail, load_settings

__all__ = ["serve", "version_command"]


def _tracing(on: bool, endpoint: str | None) -> Callable[[Any], Any]:
    """The app wrapper MEMLEDGER_OTEL asks for; exits with the hint when the extra is missing."""
    if not on:
        return lambda app: app
    from api.tracing import TracingUnavailable, tracing

    try:
        return tracing(endpoint)
    except TracingUnavailable as error:
        fail(f"memledger: {error}")


def version_command() -> None:
    """Print the installed memledger version."""
    from api.version import package_version

    typer.echo(package_version())


def serve(
    host: Annotated[str | None, typer.Option(help="interface to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to listen on")] = None,
    worker: Annotated[bool, typer.Option(help="run the projection worker in this process")] = True,
) -> None:
    """Serve the HTTP API (embedded PostgreSQL when MEMLEDGER_DATABASE_URL is unset)."""
    import uvicorn

    from api.app import create_app
    from api.bootstrap import (
        build_embedding_worker,
        build_embeddings,
        build_ledger,
        build_read_pool,
        build_reranker,
        build_services,
        build_worker,
        resolve_database_url,
        warm_search,
    )
    from api.credentials import jwt_secret
    from api.http_protocol import bounded_protocol
    from api.middleware import configure_logging
    from domain.ledger.keyring import KeyringError

    settings = load_settings()  # --dev: the shared option (api/cli/common.py)
    traced = _tracing(settings.otel, settings.otel_endpoint)
    try:
        settings = settings.model_copy(update={"jwt_secret": SecretStr(jwt_secret(settings))})
        url = resolve_database_url(settings)
        ledger = build_ledger(settings, url)
    except KeyringError as error:
        fail(f"memledger: {error}")
    complete_shredding(ledger)
    embeddings = build_embeddings(settings)
    reranker = build_reranker(settings)
    warm_search(embeddings, reranker)  # not in the first search, within its deadline
    read_pool = build_read_pool(settings, url)
    projection_worker = build_worker(settings, ledger, url, embeddings, status_pool=read_pool)
    embedding_worker = build_embedding_worker(
        settings, ledger, url, embeddings, status_pool=read_pool
    )
    if worker:
        projection_worker.start()
        embedding_worker.start()  # its own thread: embedding never holds the others back
    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # it found: make that handler a clean exit, so the worker and pools below close properly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dump_stacks_on_sigusr1()
    bind_host, bind_port = host or settings.host, port or settings.port
    if settings.dev:
        from api.console import console_link
        from api.tokens import mint_token

        secret = settings.jwt_secret.get_secret_value() if settings.jwt_secret else ""
        link = console_link(f"http://{bind_host}:{bind_port}", mint_token(secret, "dev"))
        typer.echo(f"memledger: web console (dev user `dev`, 12 h): {link}", err=True)
    try:
        configure_logging()
        uvicorn.run(
            traced(
                create_app(
                    build_services(
                        settings,
                        ledger,
                        projection_worker,
                        embeddings,
                        embedding_worker,
                        read_pool=read_pool,
                        reranker=reranker,
                    ),
                    max_lag=settings.max_projection_lag,
                )
            ),
            host=bind_host,
            port=bind_port,
            log_config=None,
            timeout_graceful_shutdown=10,
            # Connection bounds (api/http_protocol.py): idle, head and body times, open
            # connections; the in-flight cap is the app's (api/middleware.py, Admission).
            http=bounded_protocol(
                idle=settings.keep_alive_timeout,
                head=settings.header_timeout,
                body=settings.body_timeout,
                max_connections=settings.max_connections,
            ),
            # idle between requests: typed int by uvicorn, used as a float (loop.call_later)
            timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]
            ws="none",  # no WebSocket route: an upgrade would leave these bounds
        )
    finally:
        for each in (embedding_worker, projection_worker):
            each.stop()  # after in-flight requests: stops at a committed position
            each.pool.close()
        read_pool.close()
        ledger.close()
        if embeddings is not None:
            embeddings.close()
