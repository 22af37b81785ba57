"""Forgotten content leaves no readable trace on disk: raw pages of every table and index.

An attacker with the database files reads pages, not rows: DELETE and VACUUM leave the bytes
of dead tuples on them. The test writes memories, versions, candidate proposals and
profile-feeding preferences holding unique markers, forgets them (and erases a user), runs
VACUUM, then reads every block of every table, TOAST table and index of the test's schema and
of `public` with `pageinspect` and looks for each marker, in UTF-8 and JSON-escaped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from domain.ledger.access import AccessHit, result_entries
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from projections.reads import Reads
from projections.worker import ProjectionWorker
from retrieval.fetch import fetch_rows
from retrieval.query import Query

LEARNING = Scope.workspace("learning")


def marker(tag: str) -> str:
    """A unique lowercase marker with CJK in it (JSON escapes those as \\uXXXX)."""
    return f"zq{tag}{uuid.uuid4().hex[:16]}标记"


def forms(text: str) -> list[bytes]:
    """The byte strings that would betray `text`: UTF-8, JSON-escaped, and its ASCII core."""
    core = text.rstrip("标记")
    return [text.encode(), json.dumps(text)[1:-1].encode(), core.encode()]


def relations(conn: psycopg.Connection[Any], schemas: list[str]) -> Iterator[tuple[str, int]]:
    """Every table, TOAST table, index and materialised view of these schemas, with its blocks."""
    rows = conn.execute(
        "WITH own AS (SELECT c.oid, c.reltoastrelid FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'i', 'm', 't')),"
        " toast AS (SELECT reltoastrelid AS oid FROM own WHERE reltoastrelid <> 0),"
        " toast_index AS (SELECT indexrelid AS oid FROM pg_index WHERE indrelid IN"
        "  (SELECT oid FROM toast))"
        " SELECT c.oid::regclass::text,"
        "  pg_relation_size(c.oid) / current_setting('block_size')::int"
        " FROM pg_class c WHERE c.oid IN"
        "  (SELECT oid FROM own UNION SELECT oid FROM toast UNION SELECT oid FROM toast_index)",
        (schemas,),
    ).fetchall()
    yield from ((name, int(blocks)) for name, blocks in rows)


def page_hits(
    conn: psycopg.Connection[Any], schemas: list[str], needles: dict[bytes, str]
) -> list[str]:
    """`relation#block: marker` for every needle found in a raw page."""
    hits = []
    for name, blocks in relations(conn, schemas):
        for block in range(blocks):
            row = conn.execute("SELECT public.get_raw_page(%s, %s)", (name, block)).fetchone()
            assert row is not None
            page = bytes(row[0])
            hits += [
                f"{name}#{block}: {text}" for needle, text in needles.items() if needle in page
            ]
    return hits


@pytest.fixture
def inspect(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
        except psycopg.Error as error:  # not installed with this server
            pytest.skip(f"pageinspect is not available: {error}")
        yield conn


def test_forgotten_and_erased_content_is_in_no_raw_page(
    ledger: MemoryLedger,
    worker: ProjectionWorker,
    inspect: psycopg.Connection[Any],
    pg_schema: str,
    clock: Any,
) -> None:
    secrets: list[str] = []

    def secret(tag: str) -> str:
        made = marker(tag)
        secrets.append(made)
        return made

    # A memory with a personal key, updated (two versions), searched, read, then forgotten.
    key = f"key_{uuid.uuid4().hex[:12]}"
    secrets.append(key)
    first = ledger.create_memory(
        "alice",
        scope=Scope.global_(),
        memory_key=key,
        content=f"I prefer {secret('content')} examples",
        category="preference",
    ).memory
    assert first is not None
    ledger.update_memory(
        "alice", first.memory_id, expected_revision=1, content=f"now {secret('version')} first"
    )
    # A preference feeding the profile with an open value (the marker becomes the value).
    major = secret("major")
    feeding = ledger.create_memory(
        "alice", scope=LEARNING, memory_key="major", content=major, category="background"
    ).memory
    assert feeding is not None
    # A proposal about the first memory (shredded by its forget), and a rejected one.
    ledger.propose_candidate(
        "alice",
        operation="replace",
        scope=Scope.global_(),
        memory_key=key,
        content=f"replace with {secret('replacement')}",
        category="preference",
        target_memory_id=first.memory_id,
    )
    rejected = ledger.propose_candidate(
        "alice",
        operation="create",
        scope=LEARNING,
        memory_key=f"proposed_{uuid.uuid4().hex[:8]}",
        content=f"maybe {secret('rejected')}",
        category="fact",
    ).candidate
    assert rejected is not None
    ledger.reject_candidate("alice", rejected.candidate_id)
    # Bob's memories and a pending proposal, all gone with the erasure of his account.
    ledger.create_memory(
        "bob",
        scope=Scope.global_(),
        memory_key=f"bob_{uuid.uuid4().hex[:8]}",
        content=f"bob {secret('bob')}",
        category="fact",
    )
    ledger.propose_candidate(
        "bob",
        operation="create",
        scope=Scope.global_(),
        memory_key="diet",
        content=f"bob eats {secret('pending')}",
        category="preference",
    )
    worker.catch_up()
    # Reads and searches leave access records (ids only) and warm every index.
    reads = Reads(worker.pool, worker.schema, worker.ledger.partition)
    found = fetch_rows(reads, "alice", [Scope.global_()], Query.of("first"), now=clock.now)
    assert [row["memory_id"] for row in found] == [first.memory_id]
    ledger.record_access(
        result_entries(
            "search",
            user_id="alice",
            tool="search_core_memories",
            workspace=None,
            request_id="r1",
            hits=[AccessHit(first.memory_id, "global", None, 2)],
            at=datetime.now(UTC),
        )
    )

    ledger.forget_memory("alice", first.memory_id)
    ledger.forget_memory("alice", feeding.memory_id)
    ledger.erase_user("bob")
    worker.catch_up()
    for (name,) in inspect.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (pg_schema,),
    ).fetchall():
        inspect.execute(f"VACUUM {name}")

    needles = {needle: text for text in secrets for needle in forms(text)}
    hits = page_hits(inspect, [pg_schema, "public"], needles)
    assert hits == [], hits


def test_tables_of_sealed_or_keyed_rows_vacuum_after_a_few_dead_rows(
    worker: ProjectionWorker, inspect: psycopg.Connection[Any], pg_schema: str
) -> None:
    rows = inspect.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (pg_schema,),
    ).fetchall()
    prompt = {
        name for name, options in rows if "autovacuum_vacuum_scale_factor=0" in (options or [])
    }
    sealed = {"active_memories", "memory_versions", "search_terms", "candidates"}
    sealed |= {"profile_sources", "embeddings"}
    assert {f"memledger_{name}" for name in sealed} <= prompt
