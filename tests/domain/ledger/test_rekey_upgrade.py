"""Upgrade in place (issue 27): the write-side tables of the release before it, keyed by partition.

The old schema is made here by writing with today's code, then taking the tables back to the
shape the previous release made (its DDL, copied below from domain/ledger/persistence/tables.py
and the library's events table as of commit 45faa7b): data keys, key claims and candidate
fingerprints without `partition`, keyed globally; the events keyed by (originator_id,
originator_version) with a UNIQUE index on notification_id. Starting the ledger must give every
row its user's partition (the ledger's own key: LEDGER_PARTITION), key every table by
partition, once even when two processes start together, and crypto-shredding must still
cascade: a destroyed key takes its candidates' keys, its claims and fingerprints with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence import rekey
from domain.ledger.persistence.tables import DATA_KEYS, FINGERPRINTS, KEY_CLAIMS, LEDGER_PARTITION
from domain.model.values import Scope
from tests.raw_events import number_as_released_before

_OLD_SIDE_TABLES = [  # the previous release's create_statements("SCHEMA"), verbatim
    'CREATE TABLE IF NOT EXISTS "SCHEMA"."memledger_data_keys" ( key_id uuid PRIMARY KEY,'
    " user_id text NOT NULL, kind text NOT NULL CHECK (kind IN ('memory', 'candidate', 'user')),"
    " subject_memory_id uuid NULL, master_key_id text NOT NULL, wrapped bytea NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    'CREATE INDEX IF NOT EXISTS "memledger_data_keys_user_idx" ON "SCHEMA"."memledger_data_keys"'
    " (user_id, kind)",
    'CREATE INDEX IF NOT EXISTS "memledger_data_keys_subject_idx" ON "SCHEMA".'
    '"memledger_data_keys" (subject_memory_id)',
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname ="
    " 'memledger_data_keys_subject_fkey' AND conrelid = (quote_ident('SCHEMA') || '.' ||"
    " quote_ident('memledger_data_keys'))::regclass) THEN ALTER TABLE \"SCHEMA\"."
    '"memledger_data_keys" ADD CONSTRAINT "memledger_data_keys_subject_fkey" FOREIGN KEY'
    ' (subject_memory_id) REFERENCES "SCHEMA"."memledger_data_keys" (key_id) ON DELETE CASCADE'
    " NOT VALID; END IF; END $$",
    'CREATE TABLE IF NOT EXISTS "SCHEMA"."memledger_key_claims" ( claim text PRIMARY KEY,'
    " memory_id uuid NOT NULL UNIQUE, user_id text NOT NULL)",
    'CREATE INDEX IF NOT EXISTS "memledger_key_claims_user_idx" ON "SCHEMA".'
    '"memledger_key_claims" (user_id)',
    'CREATE TABLE IF NOT EXISTS "SCHEMA"."memledger_candidate_fingerprints" ( candidate_id uuid'
    " PRIMARY KEY, user_id text NOT NULL, fingerprint text NOT NULL, subject_memory_id uuid NULL,"
    " state text NOT NULL CHECK (state IN ('pending', 'rejected', 'closed')),"
    " changed_at timestamptz NOT NULL)",
    'CREATE INDEX IF NOT EXISTS "memledger_candidate_fingerprints_lookup_idx" ON "SCHEMA".'
    '"memledger_candidate_fingerprints" (user_id, fingerprint)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "memledger_candidate_fingerprints_pending_idx" ON'
    ' "SCHEMA"."memledger_candidate_fingerprints" (user_id, fingerprint) WHERE state = \'pending\'',
    'CREATE INDEX IF NOT EXISTS "memledger_candidate_fingerprints_decided_idx" ON "SCHEMA".'
    "\"memledger_candidate_fingerprints\" (changed_at) WHERE state <> 'pending'",
    'ALTER TABLE "SCHEMA"."memledger_data_keys" ADD COLUMN IF NOT EXISTS key_check bytea NULL',
    'CREATE UNIQUE INDEX IF NOT EXISTS "memledger_data_keys_check_idx" ON "SCHEMA".'
    '"memledger_data_keys" (key_id, key_check)',
    'ALTER TABLE "SCHEMA"."memledger_key_claims" ADD COLUMN IF NOT EXISTS key_id uuid NULL,'
    " ADD COLUMN IF NOT EXISTS key_check bytea NULL",
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname ="
    " 'memledger_claim_hashed_under_fkey' AND conrelid = (quote_ident('SCHEMA') || '.' ||"
    " quote_ident('memledger_key_claims'))::regclass) THEN ALTER TABLE \"SCHEMA\"."
    '"memledger_key_claims" ADD CONSTRAINT "memledger_claim_hashed_under_fkey" FOREIGN KEY'
    ' (key_id, key_check) REFERENCES "SCHEMA"."memledger_data_keys" (key_id, key_check)'
    " ON DELETE CASCADE NOT VALID; END IF; END $$",
    'ALTER TABLE "SCHEMA"."memledger_candidate_fingerprints" ADD COLUMN IF NOT EXISTS key_id'
    " uuid NULL, ADD COLUMN IF NOT EXISTS key_check bytea NULL",
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname ="
    " 'memledger_print_hashed_under_fkey' AND conrelid = (quote_ident('SCHEMA') || '.' ||"
    " quote_ident('memledger_candidate_fingerprints'))::regclass) THEN ALTER TABLE \"SCHEMA\"."
    '"memledger_candidate_fingerprints" ADD CONSTRAINT "memledger_print_hashed_under_fkey"'
    ' FOREIGN KEY (key_id, key_check) REFERENCES "SCHEMA"."memledger_data_keys"'
    " (key_id, key_check) ON DELETE CASCADE NOT VALID; END IF; END $$",
    'CREATE INDEX IF NOT EXISTS "memledger_key_claims_key_idx" ON "SCHEMA".'
    '"memledger_key_claims" (key_id)',
    'CREATE INDEX IF NOT EXISTS "memledger_candidate_fingerprints_key_idx" ON "SCHEMA".'
    '"memledger_candidate_fingerprints" (key_id)',
]
_OLD_EVENTS_KEYS = [  # the library's keys of the events table (eventsourcing.postgres)
    'ALTER TABLE "SCHEMA"."EVENTS" ADD PRIMARY KEY (originator_id, originator_version)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "EVENTS_notification_id_idx" ON "SCHEMA"."EVENTS"'
    " (notification_id ASC)",
]
_SIDE = (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS)
_COLUMNS = {
    DATA_KEYS: "key_id, user_id, kind, subject_memory_id, master_key_id, wrapped, created_at,"
    " key_check",
    KEY_CLAIMS: "claim, memory_id, user_id, key_id, key_check",
    FINGERPRINTS: "candidate_id, user_id, fingerprint, subject_memory_id, state, changed_at,"
    " key_id, key_check",
}


def _t(schema: str, name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))


def _rows(conn: psycopg.Connection[Any], schema: str, name: str) -> set[tuple[Any, ...]]:
    statement = sql.SQL("SELECT {} FROM {}").format(sql.SQL(_COLUMNS[name]), _t(schema, name))
    return {tuple(row) for row in conn.execute(statement).fetchall()}


def _as_released_before(conn: psycopg.Connection[Any], schema: str, events: str) -> None:
    """The write-side tables and the events' keys as the previous release made them."""
    with conn.transaction():
        for name in _SIDE:
            conn.execute(
                sql.SQL("CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} FROM {}").format(
                    sql.Identifier(f"old_{name}"), sql.SQL(_COLUMNS[name]), _t(schema, name)
                )
            )
        for name in reversed(_SIDE):
            conn.execute(sql.SQL("DROP TABLE {}").format(_t(schema, name)))
        for statement in _OLD_SIDE_TABLES:
            conn.execute(statement.replace("SCHEMA", schema).encode())
        for name in _SIDE:
            conn.execute(
                sql.SQL("INSERT INTO {} ({}) SELECT * FROM {}").format(
                    _t(schema, name), sql.SQL(_COLUMNS[name]), sql.Identifier(f"old_{name}")
                )
            )
        number_as_released_before(conn, schema, events)
        table = _t(schema, events)
        conn.execute(
            sql.SQL(
                "ALTER TABLE {} DROP CONSTRAINT {}, ALTER COLUMN partition DROP NOT NULL"
            ).format(table, sql.Identifier(f"{events}_partition_pkey"))
        )
        for index in ("originator_idx", "partition_notification_idx"):
            conn.execute(sql.SQL("DROP INDEX {}").format(_t(schema, f"{events}_{index}")))
        for statement in _OLD_EVENTS_KEYS:
            conn.execute(statement.replace("SCHEMA", schema).replace("EVENTS", events).encode())


def _keys_led_by_partition(conn: psycopg.Connection[Any], schema: str, events: str) -> None:
    """Every unique index of the five tables starts with partition; every foreign key has it
    on both sides; every write-side primary key and the events' are led by it."""
    for name in (*_SIDE, events):
        rows = conn.execute(
            "SELECT i.indexrelid::regclass::text, a.attname FROM pg_index i"
            " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE i.indrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass"
            " AND i.indisunique",
            (schema, name),
        ).fetchall()
        assert rows and all(column == "partition" for _, column in rows), (name, rows)
        foreign = conn.execute(
            "SELECT conname, conkey, confkey, pg_get_constraintdef(c.oid) FROM pg_constraint c"
            " WHERE conrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass"
            " AND contype = 'f'",
            (schema, name),
        ).fetchall()
        for conname, _, _, definition in foreign:
            assert definition.startswith("FOREIGN KEY (partition,"), conname
            assert "(partition," in definition.split("REFERENCES")[1], conname
            assert "ON DELETE CASCADE" in definition, conname


def _present(conn: psycopg.Connection[Any], schema: str, name: str, column: str, value: Any) -> int:
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
            _t(schema, name), sql.Identifier(column)
        ),
        (value,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _propose(ledger: MemoryLedger, key: str, content: str, about: UUID | None = None) -> UUID:
    outcome = ledger.propose_candidate(
        "alice",
        operation="replace" if about else "create",
        scope=Scope.global_(),
        memory_key=key,
        content=content,
        category="preference",
        target_memory_id=about,
    )
    assert outcome.candidate is not None
    return outcome.candidate.candidate_id


def test_the_write_side_tables_of_the_previous_release_are_keyed_by_partition_in_place(
    ledger: MemoryLedger,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    def remember(user: str, key: str, content: str) -> UUID:
        outcome = ledger.create_memory(
            user, scope=Scope.global_(), memory_key=key, content=content, category="fact"
        )
        assert outcome.memory is not None
        return outcome.memory.memory_id

    forgotten = remember("alice", "style", "examples first")
    kept = remember("alice", "tone", "short answers")
    about = _propose(ledger, "style", "definitions first", forgotten)  # keyed by its memory
    pending = _propose(ledger, "lang", "reply in English")  # keyed by alice's own key
    rejected = _propose(ledger, "diet", "no sugar")
    ledger.reject_candidate("alice", rejected)
    bobs = remember("bob", "exam", "in June")
    events = ledger.store.recorder().events_table_name
    partition = {"alice": ledger.partition("alice"), "bob": ledger.partition("bob")}
    partition[""] = LEDGER_PARTITION
    with psycopg.connect(database_url, autocommit=True) as conn:
        before = {name: _rows(conn, pg_schema, name) for name in _SIDE}
        _as_released_before(conn, pg_schema, events)
        assert rekey.needed(ledger._datastore, events)
    ledger.close()

    # Two processes start at once: the tables are re-keyed once, and both serve.
    started: list[MemoryLedger] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            started.append(make_ledger())
        except BaseException as error:  # pragma: no cover - reported below
            failed.append(error)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed and len(started) == 2
    upgraded = started[0]
    assert not rekey.needed(upgraded._datastore, events)
    assert rekey.rekey(upgraded._datastore, events, upgraded.partition) == 0  # idempotent

    with psycopg.connect(database_url, autocommit=True) as conn:
        for name in _SIDE:  # every row kept, in its user's partition
            assert _rows(conn, pg_schema, name) == before[name]
            placed = conn.execute(
                sql.SQL("SELECT DISTINCT user_id, partition FROM {}").format(_t(pg_schema, name))
            ).fetchall()
            assert {user: p for user, p in placed} == {user: partition[user] for user, _ in placed}
        _keys_led_by_partition(conn, pg_schema, events)
        # The positions given out before partitions still translate (by notification id).
        last = conn.execute(
            sql.SQL("SELECT max(notification_id) FROM {} WHERE partition = %s").format(
                _t(pg_schema, events)
            ),
            (partition["alice"],),
        ).fetchone()
        assert last is not None
        assert upgraded.store.recorder().legacy_position(partition["alice"], last[0]) > 0

    # Forgetting after the upgrade still shreds: the memory's key, the key of the candidate
    # about it, its claim and the fingerprint hashed under its key go in its transaction.
    assert upgraded.get_memory("bob", bobs).content == "in June"
    upgraded.forget_memory("alice", forgotten)
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _present(conn, pg_schema, DATA_KEYS, "key_id", forgotten) == 0
        assert _present(conn, pg_schema, DATA_KEYS, "key_id", about) == 0
        assert _present(conn, pg_schema, KEY_CLAIMS, "memory_id", forgotten) == 0
        assert _present(conn, pg_schema, FINGERPRINTS, "candidate_id", about) == 0
        assert _present(conn, pg_schema, DATA_KEYS, "key_id", kept) == 1
        # The foreign keys cascade by themselves: destroying alice's own key removes the
        # claims and fingerprints hashed under it (the re-keyed ON DELETE CASCADE).
        hashed = _present(conn, pg_schema, KEY_CLAIMS, "key_id", user_key_id("alice"))
        assert hashed == 1 and _present(conn, pg_schema, FINGERPRINTS, "candidate_id", pending)
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE partition = %s AND key_id = %s").format(
                _t(pg_schema, DATA_KEYS)
            ),
            (partition["alice"], user_key_id("alice")),
        )
        assert _present(conn, pg_schema, KEY_CLAIMS, "key_id", user_key_id("alice")) == 0
        assert _present(conn, pg_schema, FINGERPRINTS, "candidate_id", pending) == 0
        assert _present(conn, pg_schema, FINGERPRINTS, "candidate_id", rejected) == 0
    # And new writes go on: a new user's key, claim and fingerprint in their partition.
    upgraded.keys.forget_all_cached()
    outcome = upgraded.create_memory(
        "carol", scope=Scope.global_(), memory_key="k", content="tea", category="fact"
    )
    assert outcome.memory is not None
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT partition FROM {} WHERE memory_id = %s").format(
                _t(pg_schema, KEY_CLAIMS)
            ),
            (outcome.memory.memory_id,),
        ).fetchone()
        assert row == (upgraded.partition("carol"),)
