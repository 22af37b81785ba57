"""Data keys: wrapped by a master key outside the database, rotatable without touching events."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import psycopg
import pytest
from eventsourcing.persistence import MapperDeserialisationError
from psycopg import sql

from domain.errors import MasterKeyMissing
from domain.ledger.keyring import generate_master_key
from domain.ledger.ledger import MemoryLedger
from domain.model.events import REDACTED
from domain.model.values import Scope
from tests.schemas import drop_schema


def remember(ledger: MemoryLedger, content: str, key: str = "k") -> object:
    return ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key=key, content=content, category="fact"
    ).memory


def events_digest(database_url: str, schema: str) -> str:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT originator_id, originator_version, topic, state FROM {}.memledger_events"
                " ORDER BY notification_id"
            ).format(sql.Identifier(schema))
        ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_a_backup_of_the_events_table_alone_cannot_be_decrypted(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    memory = remember(ledger, "my favourite colour is teal")
    restored_schema = f"{pg_schema}_restore"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(restored_schema)))
    try:
        restored = make_ledger(schema=restored_schema)  # same master key, tables created empty
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memledger_events (originator_id, originator_version, topic,"
                    " state, partition, position, recorded_at) SELECT originator_id,"
                    " originator_version, topic, state, partition, position, recorded_at"
                    " FROM {}.memledger_events"
                ).format(sql.Identifier(restored_schema), sql.Identifier(pg_schema))
            )
        (created,) = restored.events.get(memory.memory_id)  # type: ignore[attr-defined]
        assert created.content == REDACTED
    finally:
        drop_schema(database_url, restored_schema)


def test_the_database_without_the_master_key_cannot_be_decrypted(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    memory = remember(ledger, "my favourite colour is teal")
    intruder = make_ledger(keys=[generate_master_key()])
    with pytest.raises(MasterKeyMissing):
        list(intruder.events.get(memory.memory_id))  # type: ignore[attr-defined]


def test_rotation_rewraps_every_data_key_and_leaves_events_untouched(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    master_key: str,
    database_url: str,
    pg_schema: str,
) -> None:
    memories = [remember(ledger, f"fact number {i}", key=f"k{i}") for i in range(5)]
    ledger.propose_candidate(
        "alice",
        operation="create",
        scope=Scope.global_(),
        memory_key="c",
        content="maybe",
        category="fact",
    )
    before = events_digest(database_url, pg_schema)
    new_key = generate_master_key()

    rotating = make_ledger(keys=[new_key, master_key])
    rewrapped = rotating.keys.rotate(batch_size=2)

    assert rewrapped == 5 + 1 + 1 + 1  # memories, the candidate, alice's own key, the ledger's
    assert rotating.keys.rotate() == 0  # idempotent
    assert events_digest(database_url, pg_schema) == before
    only_new = make_ledger(keys=[new_key])
    assert [only_new.get_memory("alice", m.memory_id).content for m in memories] == [  # type: ignore[attr-defined]
        f"fact number {i}" for i in range(5)
    ]
    with pytest.raises(MasterKeyMissing):
        make_ledger(keys=[master_key]).get_memory("alice", memories[0].memory_id)  # type: ignore[attr-defined]


def test_a_tampered_event_is_refused_not_redacted(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    memory = remember(ledger, "my favourite colour is teal")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {}.memledger_events SET state = overlay(state placing '\\x00'::bytea"
                " from length(state) - 3) WHERE originator_id = %s"
            ).format(sql.Identifier(pg_schema)),
            (memory.memory_id,),  # type: ignore[attr-defined]
        )
    with pytest.raises(MapperDeserialisationError):
        list(make_ledger().events.get(memory.memory_id))  # type: ignore[attr-defined]


def test_clear_fields_cannot_be_moved_to_another_user(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    memory = remember(ledger, "my favourite colour is teal")
    events = sql.SQL("{}.memledger_events").format(sql.Identifier(pg_schema))
    with psycopg.connect(database_url, autocommit=True) as conn:
        (state,) = conn.execute(
            sql.SQL("SELECT state FROM {} WHERE originator_id = %s").format(events),
            (memory.memory_id,),  # type: ignore[attr-defined]
        ).fetchone()
        forged = bytes(state).replace(b'"alice"', b'"mallo"')
        assert forged != bytes(state)
        conn.execute(
            sql.SQL("UPDATE {} SET state = %s WHERE originator_id = %s").format(events),
            (forged, memory.memory_id),  # type: ignore[attr-defined]
        )
    with pytest.raises(MapperDeserialisationError):
        list(make_ledger().events.get(memory.memory_id))  # type: ignore[attr-defined]
