"""Projection tables as the release before issue 27 made them: no `partition` column.

`OLD_DDL` is that release's CREATE statements, copied from its code (commit 45faa7b,
`create_tracking`, `create_quarantine` and each projection's `create`), tables only, with the
two indexes the audit feed read that the new DDL drops; `as_before_partitioned_views` turns
the live tables of a schema made by this release back into those tables, rows kept (less
their `partition`), as a schema of that release holds them.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.tracking import Tables

OLD_DDL = [
    (
        'CREATE TABLE {schema}."memledger_projection_tracking" ( projection text NOT NULL,'
        " partition int NOT NULL, position bigint NOT NULL,"
        " updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (projection,"
        " partition))"
    ),
    (
        'CREATE TABLE {schema}."memledger_projection_quarantine" ( projection text NOT NULL,'
        " position bigint NOT NULL, originator_id uuid NOT NULL, version bigint NOT NULL,"
        " topic text NOT NULL, error_class text NOT NULL, error_code text NULL,"
        " quarantined_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (projection,"
        " position))"
    ),
    (
        'CREATE TABLE {schema}."memledger_user_revisions" ( user_id text PRIMARY KEY,'
        " revision bigint NOT NULL)"
    ),
    (
        'CREATE TABLE {schema}."memledger_active_memories" ("memory_id" uuid PRIMARY KEY,'
        ' "user_id" text NOT NULL, "key_hash" text NOT NULL, "memory_key" bytea NOT NULL,'
        ' "content" bytea NOT NULL, "category" text NOT NULL, "scope_type" text NOT NULL,'
        ' "workspace_type" text NULL, "source_type" text NOT NULL, "status" text NOT NULL,'
        ' "revision" int4 NOT NULL, "created_at" timestamptz NOT NULL,'
        ' "updated_at" timestamptz NOT NULL, "last_confirmed_at" timestamptz NULL,'
        ' "review_after" timestamptz NULL, "expires_at" timestamptz NULL,'
        ' "position" int8 NOT NULL)'
    ),
    (
        'CREATE TABLE {schema}."memledger_memory_versions" ( memory_id uuid NOT NULL,'
        " revision integer NOT NULL, user_id text NOT NULL, content bytea NOT NULL,"
        " category text NOT NULL, scope_type text NOT NULL, workspace_type text NULL,"
        " change_type text NOT NULL, changed_via text NOT NULL,"
        " source_candidate_id uuid NULL, created_at timestamptz NOT NULL,"
        " PRIMARY KEY (memory_id, revision))"
    ),
    (
        'CREATE TABLE {schema}."memledger_audit_log" ( position bigint PRIMARY KEY,'
        " event_id uuid NOT NULL, event_type text NOT NULL, topic text NOT NULL,"
        " memory_id uuid NULL, candidate_id uuid NULL, user_id text NULL,"
        " scope_type text NULL, workspace_type text NULL, revision integer NULL,"
        " content_hash text NULL, occurred_at timestamptz NULL, request_id text NULL)"
    ),
    (
        'CREATE INDEX "memledger_audit_log__partition" ON {schema}."memledger_audit_log"'
        " ((position & 1023), position)"
    ),
    (
        'CREATE TABLE {schema}."memledger_tombstones" ( memory_id uuid PRIMARY KEY,'
        " user_id text NOT NULL, deleted_at timestamptz NOT NULL,"
        " final_revision integer NOT NULL)"
    ),
    (
        'CREATE TABLE {schema}."memledger_candidates" ( candidate_id uuid PRIMARY KEY,'
        " user_id text NOT NULL, operation text NOT NULL, target_memory_id uuid NULL,"
        " expected_revision integer NULL, proposed_scope_type text NOT NULL,"
        " proposed_workspace_type text NULL, proposed_key bytea NOT NULL,"
        " proposed_content bytea NOT NULL, proposed_category text NOT NULL,"
        " source_conversation_id text NULL, status text NOT NULL,"
        " resulting_memory_id uuid NULL, created_at timestamptz NOT NULL,"
        " decided_at timestamptz NULL, expires_at timestamptz NOT NULL)"
    ),
    (
        'CREATE TABLE {schema}."memledger_profile_sources" ( user_id text NOT NULL,'
        " memory_id uuid NOT NULL, field text NOT NULL, value bytea NOT NULL,"
        " scope_type text NOT NULL, workspace_type text NULL, active boolean NOT NULL,"
        " updated_at timestamptz NOT NULL, PRIMARY KEY (memory_id, field))"
    ),
    (
        'CREATE TABLE {schema}."memledger_profile_memories" ( memory_id uuid PRIMARY KEY,'
        " user_id text NOT NULL, memory_key text NOT NULL, active boolean NOT NULL,"
        " expires_at timestamptz NULL)"
    ),
    (
        'CREATE TABLE {schema}."memledger_profile_changes" ( position bigint NOT NULL,'
        " seq smallint NOT NULL, event_id uuid NOT NULL, event_type text NOT NULL,"
        " memory_id uuid NOT NULL, user_id text NOT NULL, scope_type text NOT NULL,"
        " workspace_type text NULL, revision integer NULL, occurred_at timestamptz NULL,"
        " request_id text NULL, PRIMARY KEY (position, seq))"
    ),
    (
        'CREATE INDEX "memledger_profile_changes__partition"'
        ' ON {schema}."memledger_profile_changes" ((position & 1023), position)'
    ),
    (
        'CREATE TABLE {schema}."memledger_search_terms" ("memory_id" uuid PRIMARY KEY,'
        ' "user_id" text NOT NULL, "key_hash" text NOT NULL, "memory_key" bytea NOT NULL,'
        ' "content" bytea NOT NULL, "category" text NOT NULL, "scope_type" text NOT NULL,'
        ' "workspace_type" text NULL, "source_type" text NOT NULL, "status" text NOT NULL,'
        ' "revision" int4 NOT NULL, "updated_at" timestamptz NOT NULL,'
        ' "last_confirmed_at" timestamptz NULL, "review_after" timestamptz NULL,'
        ' "expires_at" timestamptz NULL, "terms" int8[] NOT NULL,'
        ' "key_terms" int8[] NOT NULL, "position" int8 NOT NULL)'
    ),
    (
        'CREATE TABLE {schema}."memledger_embeddings" ("memory_id" uuid PRIMARY KEY,'
        ' "user_id" text NOT NULL, "memory_key" bytea NOT NULL, "revision" int4 NOT NULL,'
        ' "model" text NULL, "vector" bytea NULL, "hubness" bytea NULL)'
    ),
    (
        'CREATE TABLE {schema}."memledger_embedding_stamps" (user_id text PRIMARY KEY,'
        " stamp uuid NOT NULL)"
    ),
]


def _table(statement: str) -> str | None:
    if not statement.startswith("CREATE TABLE"):
        return None
    return statement.split('"')[1]


def as_before_partitioned_views(conn: psycopg.Connection[Any], t: Tables) -> None:
    """Every projection table of the schema, kept under another name, made anew by OLD_DDL and
    filled with its rows (the columns it has: all but `partition`), in one transaction."""
    schema = sql.Identifier(t.schema)
    with conn.transaction():
        kept = []
        for statement in OLD_DDL:
            table = _table(statement)
            if table is not None:
                conn.execute(
                    sql.SQL("ALTER TABLE {}.{} RENAME TO {}").format(
                        schema, sql.Identifier(table), sql.Identifier(table + "__kept")
                    )
                )
                kept.append(table)
            conn.execute(statement.format(schema=schema.as_string(conn)).encode())
        for table in kept:
            columns = [
                row[0]
                for row in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (f'"{t.schema}"."{table}"',),
                ).fetchall()
            ]
            names = sql.SQL(", ").join(map(sql.Identifier, columns))
            conn.execute(
                sql.SQL("INSERT INTO {}.{} ({}) SELECT {} FROM {}.{}").format(
                    schema,
                    sql.Identifier(table),
                    names,
                    names,
                    schema,
                    sql.Identifier(table + "__kept"),
                )
            )
            conn.execute(
                sql.SQL("DROP TABLE {}.{}").format(schema, sql.Identifier(table + "__kept"))
            )
