"""`memledger projections run | rebuild | status | quarantine`: the read models' workers,
rebuilds, and the events they set aside."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Final

import typer

from api.cli.common import (
    EXIT_NOT_DONE,
    EXIT_REFUSED,
    complete_shredding,
    dump_stacks_on_sigusr1,
    fail,
    load_settings,
)
from api.settings import Settings

if TYPE_CHECKING:
    from domain.ledger.ledger import MemoryLedger
    from projections.quarantine import Quarantined
    from projections.worker import ProjectionWorker
    from retrieval.vectors.service import EmbeddingService

__all__ = ["projections_app"]

BATCH: Final = 5000
"""Events per transaction of a rebuild, by default: projections.applying.BATCH (which says why),
written here so that the CLI starts without importing the projections (a test pins the two)."""
MIN_BATCH: Final = 50
PROGRESS_STEPS: Final = 20
"""Batches a rebuild's default batch size aims for at least, above MIN_BATCH events each."""

projections_app = typer.Typer(
    no_args_is_help=True, help="Read models: run, rebuild, status, quarantine."
)


@projections_app.command("run")
def run_projections() -> None:
    """Follow the ledger and keep every projection up to date (its own process).

    Two workers: the embeddings projection in a thread of its own, every other in the
    foreground.
    """

    settings = load_settings()
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    complete_shredding(ledger)

    def stop(*_: object) -> None:
        worker.stop(timeout=0)
        embedding_worker.stop(timeout=0)

    signal.signal(signal.SIGTERM, stop)
    dump_stacks_on_sigusr1()
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
    batch: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"events per transaction (default {BATCH}, or a twentieth of a smaller ledger,"
            f" at least {MIN_BATCH}: a batch is a step of the progress shown)",
        ),
    ] = None,
    processes: Annotated[
        int,
        typer.Option(
            min=1, help="processes filling the tables, each over a share of the partitions"
        ),
    ] = 2,
    drop_vectors: Annotated[
        bool,
        typer.Option(
            "--drop-vectors",
            help="rebuild embeddings even when no embedder can recompute the stored vectors",
        ),
    ] = False,
) -> None:
    """Rebuild projections from the ledger into fresh tables and swap them in live.

    Rebuilding embeddings while the embedder is off or unavailable would throw the stored
    vectors away: refused (exit status 5) unless --drop-vectors.
    """
    from api.cli.progress import EventProgress
    from projections.rebuild import rebuild
    from projections.registry import select

    settings = load_settings()
    try:
        chosen = select(names or [])
    except KeyError as error:
        fail(str(error.args[0]))
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    embedding_worker.pool.close()
    embeddings = _embeddings_of(embedding_worker)
    chosen = select(names or [], embeddings)  # vectors from the configured embedder
    if any(p.name == "embeddings" for p in chosen) and not drop_vectors:
        _refuse_to_drop_vectors(settings, worker, ledger, embeddings)
    total = ledger.recorded()
    try:
        with EventProgress(
            "replaying the ledger", total, then="checking against live and swapping in"
        ) as progress:
            report = rebuild(
                ledger,
                worker.pool,
                settings.db_schema,
                chosen,
                batch_size=batch or _batch_for(total),
                progress=progress.advance,
                processes=processes,
                lock_timeout=settings.lock_timeout,
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
def projections_status(
    members: Annotated[
        bool,
        typer.Option(
            "--members",
            help="then each worker group's members (processes) and the partitions each holds",
        ),
    ] = False,
) -> None:
    """Each projection's position in the ledger (its partitions' positions added up) and how
    far it lags; with --members, then each worker group's members (the processes running it,
    by their listener's backend pid and application name) and the partitions each holds.

    Reads only: it creates no table and takes no DDL lock, so it answers while a table is
    locked (its reads wait MEMLEDGER_LOCK_TIMEOUT at most for the tracking table's lock).
    """
    settings = load_settings()
    ledger, worker, embedding_worker = _ledger_and_workers(settings, ensure=False)
    try:
        # Before any projection ran (no tables yet) every one is at 0, the whole ledger behind.
        for each in (worker, embedding_worker):  # embeddings: their own worker, listed last
            for status in each.status():
                typer.echo(f"{status.name:<18} position {status.position:>10}  lag {status.lag}")
        for each in (worker, embedding_worker) if members else ():  # who applies which
            for line in _members(each):  # partitions (leases)
                typer.echo(line)
    finally:
        for each in (worker, embedding_worker):
            each.pool.close()
        ledger.close()


@projections_app.command("quarantine")
def projections_quarantine(
    retry: Annotated[
        bool, typer.Option("--retry", help="apply them again (rebuilds their projections)")
    ] = False,
    projection: Annotated[
        list[str] | None, typer.Option("--projection", help="only this projection's")
    ] = None,
    position: Annotated[int | None, typer.Option(min=1, help="only the event at")] = None,
) -> None:
    """List the events projections could not apply and set aside, one line each (no content);
    `--retry` applies them again, e.g. after a fix.

    A retry rebuilds each projection concerned from the ledger (`projections rebuild`): an
    event applied alone, after the events that followed it, could bring back what a later
    event removed (a forget). Entries that apply are removed; those that fail again stay.
    Exit status: 0 listed, or every entry retried applied; 1 some stayed quarantined; 2 bad
    input (an unknown projection).
    """
    from projections.quarantine import quarantined
    from projections.rebuild import rebuild
    from projections.registry import select

    settings = load_settings()
    names = projection or []
    try:
        select(names)
    except KeyError as error:
        fail(str(error.args[0]))
    ledger, worker, embedding_worker = _ledger_and_workers(settings)
    embedding_worker.pool.close()
    try:
        with worker.pool.connection() as conn:
            entries = quarantined(conn, worker.tables, names, position)
        if not retry:
            for entry in entries:
                typer.echo(_quarantine_line(entry))
            return
        concerned = sorted({e.projection for e in entries})
        if concerned:
            chosen = select(concerned, _embeddings_of(embedding_worker))
            rebuild(
                ledger, worker.pool, settings.db_schema, chosen, lock_timeout=settings.lock_timeout
            )
        with worker.pool.connection() as conn:
            still = {(e.projection, e.position) for e in quarantined(conn, worker.tables, names)}
    finally:
        worker.pool.close()
        ledger.close()
    for entry in entries:
        verdict = "still quarantined" if (entry.projection, entry.position) in still else "applied"
        typer.echo(f"{verdict}: {entry.projection} position {entry.position}")
    if any((e.projection, e.position) in still for e in entries):
        raise typer.Exit(EXIT_NOT_DONE)


def _members(worker: ProjectionWorker) -> list[str]:
    """The worker group's line (members, partitions held of all, none held: `unheld`), then
    one line per member."""
    from projections.leases import unheld

    partitions = worker.partition_count()
    members = worker.holders()
    free = unheld(partitions, members)
    lines = [
        f"{worker.name:<18} members {len(members):>3}  partitions held"
        f" {partitions - len(free)}/{partitions}"
        + (f"  unheld {_ranges(free)}" if members and free else "")
    ]
    for member in members:
        lines.append(
            f"  pid {member.pid:<8} {member.application or '-'}:"
            f" {len(member.partitions)} partitions {_ranges(member.partitions) or '-'}"
        )
    return lines


def _ranges(partitions: Sequence[int]) -> str:
    """0,1,2,5 as 0-2,5."""
    runs: list[list[int]] = []
    for p in sorted(partitions):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def _batch_for(events: int) -> int:
    """The default batch: BATCH events, fewer on a ledger of less than 20 of them (a step of
    progress is a batch: one batch would show nothing until the end)."""
    return max(MIN_BATCH, min(BATCH, events // PROGRESS_STEPS))


def _quarantine_line(entry: Quarantined) -> str:
    return (
        f"{entry.projection:<18} position {entry.position:>10}  {entry.topic}"
        f"  {entry.error_class} {entry.error_code or '-'}"
        f"  aggregate {entry.originator_id} v{entry.version}"
        f"  at {entry.quarantined_at.isoformat(timespec='seconds')}"
    )


def _ledger_and_workers(
    settings: Settings, *, ensure: bool = True
) -> tuple[MemoryLedger, ProjectionWorker, ProjectionWorker]:
    """The ledger, the main projection worker and the embeddings projection's own worker
    (their tables made if missing, unless not `ensure`)."""
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
        build_worker(settings, ledger, url, embeddings, ensure=ensure),
        build_embedding_worker(settings, ledger, url, embeddings, ensure=ensure),
    )


def _refuse_to_drop_vectors(
    settings: Settings,
    worker: ProjectionWorker,
    ledger: MemoryLedger,
    embeddings: EmbeddingService | None,
) -> None:
    """Exit (status 5) when the rebuild would throw away vectors no embedder can recompute."""
    from projections.reads import Reads
    from projections.views.embeddings import stored_vectors

    if embeddings is not None and embeddings.warm_up():
        return
    stored = stored_vectors(Reads(worker.pool, settings.db_schema, ledger.partition))
    if not stored:
        return
    worker.pool.close()
    ledger.close()
    fail(
        f"memledger: projections rebuild: the embedder is off or unavailable; rebuilding"
        f" embeddings would throw away {stored} stored vectors it cannot recompute. Turn the"
        f" embedder on, leave embeddings out (name the projections to rebuild), or pass"
        f" --drop-vectors",
        EXIT_REFUSED,
    )


def _embeddings_of(worker: ProjectionWorker) -> EmbeddingService | None:
    from projections.views.embeddings import Embeddings

    return next((p.service for p in worker.projections if isinstance(p, Embeddings)), None)
