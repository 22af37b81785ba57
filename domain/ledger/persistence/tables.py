"""Write-side tables kept beside the events table and written in the same transactions.

`data_keys`: one wrapped AES key per memory, candidate and user; deleting a row shreds. A
candidate's key names the memory it is about (`subject_memory_id`, a foreign key): it cannot
be inserted once that memory's key is gone (forgotten), and goes when it goes.
`key_claims`: keyed hash of (user, scope, memory_key) -> live memory, for atomic uniqueness.
`candidate_fingerprints`: keyed fingerprints of proposals, to recognise repeats and rejections;
a decided one (rejected, or closed by acceptance or expiry) is deleted 30 days after.
None of them holds personal text in clear.

Every data key row carries its check value (`key_check`, see `key_check`), and every claim and
fingerprint names the key it was hashed under by (`key_id`, `key_check`), a foreign key: a
write that hashed with a key destroyed meanwhile (or destroyed and made again, as a user's key
is after an erase) cannot commit, whatever a process's cache holds, and destroying a key
deletes what was hashed under it. Rows written before these columns existed name no key (NULL:
not checked). `NewDataKey`, `Claim` and `Fingerprint` are the rows
a save inserts (pass them to `LedgerRecorder.insert_events`).

Every row carries the ledger partition of its user (`partition`, issue 27): every primary key,
unique constraint and foreign key starts with it, so that on Citus the tables are distributed
by it, colocated with the events, and a user's save or forget touches one shard. The ledger's
own key (owner "") lives in `LEDGER_PARTITION`.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from psycopg.sql import SQL, Composable, Composed, Identifier, Literal

__all__ = [
    "LAST_CREATED",
    "LEDGER_PARTITION",
    "SHAPES",
    "STALE_KEY_CONSTRAINTS",
    "Claim",
    "Fingerprint",
    "NewDataKey",
    "Shape",
    "constraint",
    "create_statements",
    "index_statement",
    "key_check",
    "revocation_channel",
    "table",
]

DATA_KEYS = "memledger_data_keys"
KEY_CLAIMS = "memledger_key_claims"
FINGERPRINTS = "memledger_candidate_fingerprints"
LEDGER_PARTITION: Final = 0
"""The partition of the ledger's own key (owner ""): its partition cannot be the keyed hash of
its owner, which is made under that very key."""
_CLAIM_KEY_FK: Final = "memledger_claim_key_fkey"
_PRINT_KEY_FK: Final = "memledger_print_key_fkey"
STALE_KEY_CONSTRAINTS: Final = frozenset({_CLAIM_KEY_FK, _PRINT_KEY_FK})
"""The foreign keys a write violates when it hashed under a key that is no longer the live one."""
LAST_CREATED = FINGERPRINTS + "_hashed_idx"
"""What the last of `create_statements` creates."""


@dataclass(frozen=True, slots=True)
class Shape:
    """One write-side table as this release makes it: columns, named constraints, indexes.

    `create_statements` makes a missing table from it; the upgrade of a table made by an
    earlier release (persistence/rekey.py) adds the same constraints and indexes to it."""

    name: str
    columns: tuple[str, ...]
    constraints: tuple[tuple[str, str], ...]
    """(name, definition); a foreign key's referenced table is written `{keys}`."""
    indexes: tuple[tuple[str, str], ...]
    """(name, "UNIQUE"-or-"" + " (columns) [WHERE ...]")."""


SHAPES: Final = (
    Shape(
        DATA_KEYS,
        (
            "partition int NOT NULL",
            "key_id uuid NOT NULL",
            "user_id text NOT NULL",
            "kind text NOT NULL CHECK (kind IN ('memory', 'candidate', 'user'))",
            "subject_memory_id uuid NULL",
            "master_key_id text NOT NULL",
            "wrapped bytea NOT NULL",
            "created_at timestamptz NOT NULL DEFAULT now()",
            "key_check bytea NULL",
        ),
        (
            (DATA_KEYS + "_pk", "PRIMARY KEY (partition, key_id)"),
            (DATA_KEYS + "_checked", "UNIQUE (partition, key_id, key_check)"),
            # A candidate's key goes with the key of the memory it is about.
            (
                DATA_KEYS + "_about_fkey",
                "FOREIGN KEY (partition, subject_memory_id) REFERENCES {keys} (partition, key_id)"
                " ON DELETE CASCADE",
            ),
        ),
        (
            (DATA_KEYS + "_owner_idx", " (partition, user_id, kind)"),
            (DATA_KEYS + "_about_idx", " (partition, subject_memory_id)"),
        ),
    ),
    Shape(
        KEY_CLAIMS,
        (
            "partition int NOT NULL",
            "claim text NOT NULL",
            "memory_id uuid NOT NULL",
            "user_id text NOT NULL",
            "key_id uuid NULL",
            "key_check bytea NULL",
        ),
        (
            (KEY_CLAIMS + "_pk", "PRIMARY KEY (partition, claim)"),
            (KEY_CLAIMS + "_memory", "UNIQUE (partition, memory_id)"),
            (
                _CLAIM_KEY_FK,
                "FOREIGN KEY (partition, key_id, key_check)"
                " REFERENCES {keys} (partition, key_id, key_check) ON DELETE CASCADE",
            ),
        ),
        (
            (KEY_CLAIMS + "_owner_idx", " (partition, user_id)"),
            # What a destroyed key's cascade finds the claims by.
            (KEY_CLAIMS + "_hashed_idx", " (partition, key_id)"),
        ),
    ),
    Shape(
        FINGERPRINTS,
        (
            "partition int NOT NULL",
            "candidate_id uuid NOT NULL",
            "user_id text NOT NULL",
            "fingerprint text NOT NULL",
            "subject_memory_id uuid NULL",
            "state text NOT NULL CHECK (state IN ('pending', 'rejected', 'closed'))",
            "changed_at timestamptz NOT NULL",
            "key_id uuid NULL",
            "key_check bytea NULL",
        ),
        (
            (FINGERPRINTS + "_pk", "PRIMARY KEY (partition, candidate_id)"),
            (
                _PRINT_KEY_FK,
                "FOREIGN KEY (partition, key_id, key_check)"
                " REFERENCES {keys} (partition, key_id, key_check) ON DELETE CASCADE",
            ),
        ),
        (
            (FINGERPRINTS + "_print_idx", " (partition, user_id, fingerprint)"),
            # At most one pending candidate per proposal: concurrent repeats collide here.
            (
                FINGERPRINTS + "_pending_print_idx",
                "UNIQUE (partition, user_id, fingerprint) WHERE state = 'pending'",
            ),
            # Decided prints go 30 days after their decision (`prune_prints_before`).
            (
                FINGERPRINTS + "_decided_at_idx",
                " (partition, changed_at) WHERE state <> 'pending'",
            ),
            (LAST_CREATED, " (partition, key_id)"),
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class NewDataKey:
    """A freshly generated data key, wrapped, waiting to be inserted with its first events."""

    key_id: UUID
    user_id: str
    kind: str
    subject_memory_id: UUID | None
    master_key_id: str
    wrapped: bytes
    key_check: bytes


@dataclass(frozen=True, slots=True)
class Claim:
    """A live memory's hold on its keyed (user, scope, key) hash, hashed under `key_id`'s key
    (whose check value is `key_check`)."""

    claim: str
    memory_id: UUID
    user_id: str
    key_id: UUID
    key_check: bytes


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The keyed fingerprint of a candidate's proposal and where the candidate stands.

    `key_id` and `key_check` name the key it was hashed under: given when the fingerprint is
    first written, None when only the state of a stored one changes (they stay as stored)."""

    candidate_id: UUID
    user_id: str
    fingerprint: str
    subject_memory_id: UUID | None
    state: str
    changed_at: datetime
    key_id: UUID | None = None
    key_check: bytes | None = None


def key_check(raw: bytes) -> bytes:
    """A data key's check value: 16 bytes of HMAC-SHA256 under the key of a fixed label.

    Stored beside the wrapped key, it tells which key a row was made with and reveals nothing
    of the key itself (a key check value, as key-management systems keep)."""
    return hmac.new(raw, b"memledger:key-check", "sha256").digest()[:16]  # see keyed_hash


def revocation_channel(schema: str) -> str:
    """The NOTIFY channel on which a schema's destroyed key ids are announced (a digest of the
    schema name: a channel is an identifier of at most 63 bytes)."""
    return "memledger_keys_" + hashlib.sha256(schema.encode()).hexdigest()[:32]


def table(schema: str, name: str) -> Composed:
    """A schema-qualified table identifier."""
    return SQL("{}.{}").format(Identifier(schema), Identifier(name))


def create_statements(schema: str) -> list[Composed]:
    """Idempotent DDL for the write-side tables: each one missing is made with its constraints
    and indexes (one DO block each). A table that exists is left as it is: one made by an
    earlier release is brought to this shape by the upgrade (persistence/rekey.py)."""
    return [_create(schema, shape) for shape in SHAPES]


def _create(schema: str, shape: Shape) -> Composed:
    target = table(schema, shape.name)
    parts: list[Composable] = [SQL(c) for c in shape.columns]
    parts += [
        SQL("CONSTRAINT {} ").format(Identifier(name)) + constraint(schema, definition)
        for name, definition in shape.constraints
    ]
    indexes = [index_statement(target, name, definition) for name, definition in shape.indexes]
    return SQL(
        "DO $$ BEGIN IF to_regclass(quote_ident({}) || '.' || quote_ident({})) IS NULL"
        " THEN CREATE TABLE {} ({}); {}; END IF; END $$"
    ).format(
        Literal(schema),
        Literal(shape.name),
        target,
        SQL(", ").join(parts),
        SQL("; ").join(indexes),
    )


def constraint(schema: str, definition: str) -> Composed:
    """A constraint's definition, its referenced table (`{keys}`) qualified by the schema."""
    return SQL(definition.replace("{keys}", "{}")).format(table(schema, DATA_KEYS))


def index_statement(target: Composed, name: str, definition: str) -> Composed:
    """CREATE [UNIQUE] INDEX IF NOT EXISTS of one of a `Shape`'s indexes."""
    unique, _, rest = definition.partition(" ")
    return SQL("CREATE {}INDEX IF NOT EXISTS {} ON {} {}").format(
        SQL("UNIQUE " if unique == "UNIQUE" else ""), Identifier(name), target, SQL(rest)
    )
