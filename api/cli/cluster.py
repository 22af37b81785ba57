"""`memledger cluster distribute | status`: the ledger on a Citus cluster (docs/cluster.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from api.cli.common import fail, load_settings, open_ledger

__all__ = ["cluster_app"]

cluster_app = typer.Typer(
    no_args_is_help=True, help="The ledger on a Citus cluster: distribute its tables, see them."
)


@cluster_app.command("distribute")
def distribute_command(
    shards: Annotated[
        int | None,
        typer.Option(min=1, max=1024, help="shards per table (default: one per partition)"),
    ] = None,
) -> None:
    """Make every table of the schema a Citus table, on the coordinator the database URL
    names: tables with users' data distributed by partition, all colocated with the events;
    the others reference tables. Creates the schema's tables first, as `serve` would.
    Idempotent. Refused (exit status 2) on a server without Citus.
    """
    import psycopg

    from api.bootstrap import build_pool, resolve_database_url
    from domain.ledger.persistence.cluster import ClusterError, citus_version, distribute
    from projections.registry import all_projections
    from projections.startup import ensure_tables

    settings = load_settings()
    url = resolve_database_url(settings)
    with psycopg.connect(url, autocommit=True) as conn:
        if citus_version(conn) is None:  # before anything is created on a plain server
            fail(
                "memledger cluster distribute: this PostgreSQL has no citus extension "
                "(CREATE EXTENSION citus on a Citus coordinator; docs/cluster.md)"
            )
    with open_ledger("memledger cluster distribute:") as ledger:
        partitions = len(ledger.heads())
        pool = build_pool(settings, url)
        try:
            ensure_tables(
                pool, settings.db_schema, all_projections(), lock_timeout=settings.lock_timeout
            )
        finally:
            pool.close()
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            done = distribute(conn, settings.db_schema, shards or partitions)
        except ClusterError as error:
            fail(f"memledger cluster distribute: {error}")
    for name in done.distributed:
        typer.echo(f"distributed by partition: {name}")
    for name in done.reference:
        typer.echo(f"reference table: {name}")
    if done.already:
        typer.echo(f"already distributed: {len(done.already)} tables")


@cluster_app.command("status")
def status_command(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
) -> None:
    """The cluster's nodes: the schema's shards and partitions on each, the events there, and
    each projection's lag (events not applied yet) in those partitions."""
    import psycopg

    from api.bootstrap import resolve_database_url
    from domain.ledger.persistence.cluster import ClusterError, status

    settings = load_settings()
    with psycopg.connect(resolve_database_url(settings), autocommit=True) as conn:
        try:
            nodes = status(conn, settings.db_schema)
        except ClusterError as error:
            fail(f"memledger cluster status: {error}")
    if as_json:
        typer.echo(json.dumps({"nodes": [node.__dict__ for node in nodes]}, indent=2))
        return
    for node in nodes:
        lag = sum(node.lag.values())
        typer.echo(
            f"{node.role:<11} {node.name}:{node.port}  shards {node.shards:>4}"
            f"  partitions {len(node.partitions):>4}  events {node.events:>9}"
            f"  projection lag {lag}"
        )
