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
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from uuid import UUID

from psycopg.sql import SQL, Composed, Identifier, Literal

__all__ = [
    "LAST_CREATED",
    "STALE_KEY_CONSTRAINTS",
    "Claim",
    "Fingerprint",
    "NewDataKey",
    "create_statements",
    "key_check",
    "revocation_channel",
    "table",
]

DATA_KEYS = "memledger_data_keys"
KEY_CLAIMS = "memledger_key_claims"
FINGERPRINTS = "memledger_candidate_fingerprints"
_CLAIM_KEY_FK: Final = "memledger_claim_hashed_under_fkey"
_PRINT_KEY_FK: Final = "memledger_print_hashed_under_fkey"
STALE_KEY_CONSTRAINTS: Final = frozenset({_CLAIM_KEY_FK, _PRINT_KEY_FK})
"""The foreign keys a write violates when it hashed under a key that is no longer the live one."""
LAST_CREATED = FINGERPRINTS + "_key_idx"
"""What the last of `create_statements` creates: all of them commit in one transaction (the
library's `create_table`), so a schema holding it holds everything they create. A statement
added later goes last and names its own object here. (The recorder runs the partitions' DDL
after these: it checks for their last object, persistence/partitions.py.)"""


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
    return hmac.digest(raw, b"memledger:key-check", "sha256")[:16]


def revocation_channel(schema: str) -> str:
    """The NOTIFY channel on which a schema's destroyed key ids are announced (a digest of the
    schema name: a channel is an identifier of at most 63 bytes)."""
    return "memledger_keys_" + hashlib.sha256(schema.encode()).hexdigest()[:32]


def table(schema: str, name: str) -> Composed:
    """A schema-qualified table identifier."""
    return SQL("{}.{}").format(Identifier(schema), Identifier(name))


def create_statements(schema: str) -> list[Composed]:
    """Idempotent DDL for the write-side tables."""
    keys, claims, prints = (table(schema, n) for n in (DATA_KEYS, KEY_CLAIMS, FINGERPRINTS))
    return [
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " key_id uuid PRIMARY KEY,"
            " user_id text NOT NULL,"
            " kind text NOT NULL CHECK (kind IN ('memory', 'candidate', 'user')),"
            " subject_memory_id uuid NULL,"
            " master_key_id text NOT NULL,"
            " wrapped bytea NOT NULL,"
            " created_at timestamptz NOT NULL DEFAULT now())"
        ).format(keys),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, kind)").format(
            Identifier(DATA_KEYS + "_user_idx"), keys
        ),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (subject_memory_id)").format(
            Identifier(DATA_KEYS + "_subject_idx"), keys
        ),
        # Added to tables made before it too; NOT VALID: rows already there are not checked.
        SQL(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = {0}"
            " AND conrelid = (quote_ident({1}) || '.' || quote_ident({4}))::regclass)"
            " THEN ALTER TABLE {2} ADD CONSTRAINT {3}"
            " FOREIGN KEY (subject_memory_id) REFERENCES {2} (key_id) ON DELETE CASCADE"
            " NOT VALID; END IF; END $$"
        ).format(
            Literal(DATA_KEYS + "_subject_fkey"),
            Literal(schema),
            keys,
            Identifier(DATA_KEYS + "_subject_fkey"),
            Literal(DATA_KEYS),
        ),
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " claim text PRIMARY KEY,"
            " memory_id uuid NOT NULL UNIQUE,"
            " user_id text NOT NULL)"
        ).format(claims),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id)").format(
            Identifier(KEY_CLAIMS + "_user_idx"), claims
        ),
        SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " candidate_id uuid PRIMARY KEY,"
            " user_id text NOT NULL,"
            " fingerprint text NOT NULL,"
            " subject_memory_id uuid NULL,"
            " state text NOT NULL CHECK (state IN ('pending', 'rejected', 'closed')),"
            " changed_at timestamptz NOT NULL)"
        ).format(prints),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, fingerprint)").format(
            Identifier(FINGERPRINTS + "_lookup_idx"), prints
        ),
        # At most one pending candidate per proposal: concurrent repeats collide here.
        SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (user_id, fingerprint)"
            " WHERE state = 'pending'"
        ).format(Identifier(FINGERPRINTS + "_pending_idx"), prints),
        # Decided prints go 30 days after their decision (`prune_prints_before`).
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (changed_at) WHERE state <> 'pending'").format(
            Identifier(FINGERPRINTS + "_decided_idx"), prints
        ),
        # Which key a row was hashed under (see the module's docstring). Added to tables made
        # before too: nullable, so adding them rewrites nothing; the constraints NOT VALID.
        SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS key_check bytea NULL").format(keys),
        SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (key_id, key_check)").format(
            Identifier(DATA_KEYS + "_check_idx"), keys
        ),
        *_hashed_under(schema, claims, KEY_CLAIMS, _CLAIM_KEY_FK, keys),
        *_hashed_under(schema, prints, FINGERPRINTS, _PRINT_KEY_FK, keys),
        # The indexes a destroyed key's cascade finds the claims and fingerprints by; last.
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (key_id)").format(
            Identifier(KEY_CLAIMS + "_key_idx"), claims
        ),
        SQL("CREATE INDEX IF NOT EXISTS {} ON {} (key_id)").format(
            Identifier(LAST_CREATED), prints
        ),
    ]


def _hashed_under(
    schema: str, target: Composed, name: str, constraint: str, keys: Composed
) -> list[Composed]:
    """The key columns of a table of keyed hashes, and their foreign key to the live key."""
    return [
        SQL(
            "ALTER TABLE {} ADD COLUMN IF NOT EXISTS key_id uuid NULL,"
            " ADD COLUMN IF NOT EXISTS key_check bytea NULL"
        ).format(target),
        SQL(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = {0}"
            " AND conrelid = (quote_ident({1}) || '.' || quote_ident({2}))::regclass)"
            " THEN ALTER TABLE {3} ADD CONSTRAINT {4} FOREIGN KEY (key_id, key_check)"
            " REFERENCES {5} (key_id, key_check) ON DELETE CASCADE NOT VALID; END IF; END $$"
        ).format(
            Literal(constraint),
            Literal(schema),
            Literal(name),
            target,
            Identifier(constraint),
            keys,
        ),
    ]
