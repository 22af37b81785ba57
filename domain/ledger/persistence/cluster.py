"""A ledger schema on a Citus cluster: its tables distributed by partition, and where they are.

Every table of a schema that holds a user's data carries `partition` (the ledger partition of
its user, persistence/partitions.py) at the head of its primary key; `distribute` makes each of
them a distributed table on that column, all colocated with the events table, so that one
partition's rows of every table live in shards on the same node: a save, a projection batch of
one partition, a forget and a search are single-shard transactions routed to that node. A table
without `partition` holds no user's data and becomes a reference table (a copy on every node).

`distribute` is idempotent: a table already distributed is left alone, after checking it is
distributed by `partition` in the events table's colocation group (anything else is refused:
moving it is an operator's decision). Creating a distributed table copies the local rows into
its shards; the copies left behind on the coordinator's disk are then truncated
(`truncate_local_data_after_distributing_table`): a stale heap page there would keep wrapped
data keys and sealed content a later forget could not reach (tests/citus: the raw-page scan on
every node).

Heads and tracking hold each partition's own (local) positions, so a node's lag is a sum.

`status` reads Citus' catalog: the nodes, the shards and partitions each holds, and each
projection's lag per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.sql import SQL, Identifier, Literal

__all__ = [
    "ClusterError",
    "Distribution",
    "NodeStatus",
    "citus_version",
    "distribute",
    "status",
]

EVENTS = "memledger_events"
_DISTRIBUTION_COLUMN = "partition"


class ClusterError(Exception):
    """The server is not a Citus coordinator, or the schema cannot be distributed as it is."""


@dataclass(frozen=True)
class Distribution:
    """What `distribute` did: tables it distributed or made reference tables, and those it
    found already distributed."""

    distributed: list[str] = field(default_factory=list)
    reference: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NodeStatus:
    """One node of the cluster and the schema's share of it."""

    name: str
    port: int
    role: str  # coordinator | worker
    shards: int
    partitions: list[int]
    events: int
    lag: dict[str, int]  # projection -> events not yet applied in this node's partitions


def citus_version(conn: psycopg.Connection[Any]) -> str | None:
    """The citus extension's version in the connected database, None without it."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
    return None if row is None else str(row[0])


def _require_citus(conn: psycopg.Connection[Any]) -> str:
    version = citus_version(conn)
    if version is None:
        raise ClusterError(
            "this PostgreSQL has no citus extension: run `memledger cluster distribute` on a"
            " Citus coordinator (CREATE EXTENSION citus; see docs/cluster.md)"
        )
    return version


def _qualified(schema: str, name: str) -> str:
    """schema.table as a regclass literal's text."""
    return SQL("{}.{}").format(Identifier(schema), Identifier(name)).as_string(None)


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, bool]]:
    """The schema's ordinary tables, (name, has a partition column), referenced tables before
    the tables whose foreign keys name them (Citus distributes the referenced one first)."""
    rows = conn.execute(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid"
        "   AND a.attname = %s AND NOT a.attisdropped) AS keyed,"
        " ARRAY(SELECT DISTINCT r.relname FROM pg_constraint k"
        "   JOIN pg_class r ON r.oid = k.confrelid"
        "   WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.confrelid <> c.oid) AS refs"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        " ORDER BY c.relname",
        (_DISTRIBUTION_COLUMN, schema),
    ).fetchall()
    keyed = {name: bool(has) for name, has, _ in rows}
    refs = {name: set(names) for name, _, names in rows}
    ordered: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered or name in path or name not in keyed:
            return
        for ref in sorted(refs[name]):
            visit(ref, (*path, name))
        ordered.append(name)

    for name in ([EVENTS] if EVENTS in keyed else []) + sorted(keyed):
        visit(name, ())
    return [(name, keyed[name]) for name in ordered]


def _citus_tables(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT c.relname AS name, p.partmethod AS method, p.colocationid AS colocation,"
            " column_to_column_name(p.logicalrelid, p.partkey) AS column"
            " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    return {row["name"]: row for row in rows}


def distribute(conn: psycopg.Connection[Any], schema: str, shards: int) -> Distribution:
    """Distribute the schema's tables (module docstring); `conn` in autocommit mode."""
    _require_citus(conn)
    tables = _tables(conn, schema)
    if not any(name == EVENTS for name, _ in tables):
        raise ClusterError(f"schema {schema!r} has no ledger (no {EVENTS} table)")
    done = Distribution()
    known = _citus_tables(conn, schema)
    anchor = known.get(EVENTS)
    for name, keyed in tables:
        found = known.get(name)
        if found is not None:
            _check(name, keyed, found, anchor)
            done.already.append(name)
            continue
        try:
            _make(conn, schema, name, keyed, shards)
        except psycopg.Error as error:
            raise ClusterError(f"cannot distribute {name}: {error}") from error
        (done.distributed if keyed else done.reference).append(name)
        if name == EVENTS:
            anchor = _citus_tables(conn, schema)[EVENTS]
    # Every run, the tables found distributed too: a run stopped between the two steps left
    # their local copies behind.
    for name, _ in reversed(tables):
        conn.execute(
            SQL("SELECT truncate_local_data_after_distributing_table({})").format(
                Literal(_qualified(schema, name))
            )
        )
    return done


def _make(conn: psycopg.Connection[Any], schema: str, name: str, keyed: bool, shards: int) -> None:
    """Distribute one table by partition beside the events (or the events themselves), or
    make it a reference table."""
    target = _qualified(schema, name)
    if name == EVENTS:  # the colocation group's first table sets the shard count
        conn.execute(
            SQL(
                "SELECT create_distributed_table({}, {}, colocate_with => 'none',"
                " shard_count => {})"
            ).format(Literal(target), Literal(_DISTRIBUTION_COLUMN), Literal(shards))
        )
    elif keyed:
        conn.execute(
            SQL("SELECT create_distributed_table({}, {}, colocate_with => {})").format(
                Literal(target), Literal(_DISTRIBUTION_COLUMN), Literal(_qualified(schema, EVENTS))
            )
        )
    else:
        conn.execute(SQL("SELECT create_reference_table({})").format(Literal(target)))


def _check(name: str, keyed: bool, found: dict[str, Any], anchor: dict[str, Any] | None) -> None:
    """A table Citus already knows must be as `distribute` would have made it."""
    if not keyed:
        if found["method"] != "n":
            raise ClusterError(f"{name} is a Citus table but not a reference table")
        return
    if found["method"] != "h" or found["column"] != _DISTRIBUTION_COLUMN:
        raise ClusterError(f"{name} is distributed, but not by hash of {_DISTRIBUTION_COLUMN}")
    if anchor is not None and found["colocation"] != anchor["colocation"]:
        raise ClusterError(f"{name} is distributed, but not colocated with {EVENTS}")


def status(conn: psycopg.Connection[Any], schema: str) -> list[NodeStatus]:
    """Every active node: its role, the schema's shards on it, the partitions whose shards it
    holds, their events, and each projection's lag there (events not yet applied)."""
    _require_citus(conn)
    events = _qualified(schema, EVENTS)
    if EVENTS not in _citus_tables(conn, schema):
        raise ClusterError(
            f"{schema}.{EVENTS} is not distributed: run `memledger cluster distribute`"
        )
    with conn.cursor(row_factory=dict_row) as cur:
        nodes = cur.execute(
            "SELECT nodename AS name, nodeport AS port,"
            " CASE WHEN groupid = 0 THEN 'coordinator' ELSE 'worker' END AS role"
            " FROM pg_dist_node WHERE isactive AND noderole = 'primary' ORDER BY groupid, nodeid"
        ).fetchall()
        placements = cur.execute(
            "SELECT s.shardid AS shard, s.nodename AS name, s.nodeport AS port,"
            " s.table_name = %s::regclass AS of_events FROM citus_shards s"
            " JOIN pg_class c ON c.oid = s.table_name JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s",
            (events, schema),
        ).fetchall()
        # Separate reads, joined here: Citus returns no row for the heads (a distributed
        # table) joined with citus_shards in one statement (tests/citus, the status test).
        heads = {
            row["partition"]: int(row["position"])
            for row in cur.execute(
                SQL("SELECT partition, position FROM {}").format(
                    SQL(_qualified(schema, "memledger_ledger_heads"))
                )
            ).fetchall()
        }
        shard_of = {
            row["partition"]: row["shard"]
            for row in cur.execute(
                "SELECT p AS partition, get_shard_id_for_distribution_column(%s, p) AS shard"
                " FROM unnest(%s::int[]) AS p",
                (events, sorted(heads)),
            ).fetchall()
        }
        tracking = cur.execute(
            SQL("SELECT projection, partition, position FROM {}").format(
                SQL(_qualified(schema, "memledger_projection_tracking"))
            )
        ).fetchall()
    count: dict[tuple[str, int], int] = {}
    node_of_shard = {}
    for row in placements:
        where = (row["name"], int(row["port"]))
        count[where] = count.get(where, 0) + 1
        if row["of_events"]:
            node_of_shard[row["shard"]] = where
    node_of = {p: node_of_shard[shard] for p, shard in shard_of.items()}
    applied = {(r["projection"], r["partition"]): int(r["position"]) for r in tracking}
    projections = sorted({projection for projection, _ in applied})
    result = []
    for node in nodes:
        where = (node["name"], int(node["port"]))
        mine = sorted(p for p, n in node_of.items() if n == where)
        lag = {
            projection: sum(heads[p] - applied.get((projection, p), 0) for p in mine)
            for projection in projections
        }
        result.append(
            NodeStatus(
                name=node["name"],
                port=int(node["port"]),
                role=node["role"],
                shards=count.get(where, 0),
                partitions=mine,
                events=sum(heads[p] for p in mine),
                lag=lag,
            )
        )
    return result
