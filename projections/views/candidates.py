"""Candidates: pending and decided proposals; shredded proposals read as REDACTED.

The proposed key and content are stored sealed with the candidate's own data key
(`projections.sealed`); a shredded proposal is stored as b"" and its key destroyed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import Cursor
from psycopg.sql import SQL, Composed, Identifier

from domain.ledger.results import CandidateState
from domain.model.candidate import MemoryCandidate
from domain.model.events import REDACTED
from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope, EventKinds
from projections.sealed import RowSeal, vacuum_promptly
from projections.tracking import Tables
from projections.views._rows import ReadSource, RowChanges

__all__ = ["Candidates", "in_status"]

COLUMNS = (
    "user_id",
    "operation",
    "target_memory_id",
    "expected_revision",
    "proposed_scope_type",
    "proposed_workspace_type",
    "proposed_key",
    "proposed_content",
    "proposed_category",
    "source_conversation_id",
    "status",
    "resulting_memory_id",
    "created_at",
    "decided_at",
    "expires_at",
)
TYPES = {
    "candidate_id": "uuid",
    "user_id": "text",
    "operation": "text",
    "target_memory_id": "uuid",
    "expected_revision": "int4",
    "proposed_scope_type": "text",
    "proposed_workspace_type": "text",
    "proposed_key": "bytea",
    "proposed_content": "bytea",
    "proposed_category": "text",
    "source_conversation_id": "text",
    "status": "text",
    "resulting_memory_id": "uuid",
    "created_at": "timestamptz",
    "decided_at": "timestamptz",
    "expires_at": "timestamptz",
}
"""Column types, as binary COPY needs them."""
_SHREDDED = {"proposed_key": REDACTED, "proposed_content": REDACTED}


class Candidates(Projection):
    """One row per candidate; forgetting a memory shreds the candidates about it."""

    name = "candidates"

    def create(self, t: Tables) -> list[Composed]:
        table = t["candidates"]
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " candidate_id uuid NOT NULL,"
                " user_id text NOT NULL,"
                " operation text NOT NULL,"
                " target_memory_id uuid NULL,"
                " expected_revision integer NULL,"
                " proposed_scope_type text NOT NULL,"
                " proposed_workspace_type text NULL,"
                " proposed_key bytea NOT NULL,"
                " proposed_content bytea NOT NULL,"
                " proposed_category text NOT NULL,"
                " source_conversation_id text NULL,"
                " status text NOT NULL,"
                " resulting_memory_id uuid NULL,"
                " created_at timestamptz NOT NULL,"
                " decided_at timestamptz NULL,"
                " expires_at timestamptz NOT NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, candidate_id))"
            ).format(table),
            vacuum_promptly(table),
            t.create_index("candidates", "user_status", "(user_id, status, created_at)"),
            t.create_index("candidates", "due", "(status, expires_at)"),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        table = t["candidates"]
        partition = batch[0].partition
        rows = RowChanges(table, "candidate_id", COLUMNS, TYPES, partition)
        # Memory id -> candidates of this batch's changes that name it (as target, or as the
        # result of an acceptance seen here): a Forgotten shreds them in memory, in order.
        about: dict[UUID, list[UUID]] = {}
        forgotten: list[UUID] = []
        for envelope in batch:
            event = envelope.event
            kind = _KINDS(type(event))
            if kind == _OTHER:
                continue
            key = envelope.originator_id
            if kind == _PROPOSED:
                row = {c: getattr(event, c, None) for c in COLUMNS}
                row["status"] = "pending"
                row["created_at"] = event.timestamp
                row["resulting_memory_id"] = None
                row["decided_at"] = None
                rows.insert(key, row)
                if row["target_memory_id"] is not None:
                    about.setdefault(row["target_memory_id"], []).append(key)
            elif kind == _ACCEPTED:
                resulting = event.resulting_memory_id
                rows.update(
                    key,
                    status="accepted",
                    decided_at=event.timestamp,
                    resulting_memory_id=resulting,
                )
                if resulting is not None:
                    about.setdefault(resulting, []).append(key)
            elif kind == _REJECTED:
                rows.update(key, status="rejected", decided_at=event.timestamp, **_SHREDDED)
            elif kind == _EXPIRED:
                rows.update(key, status="expired", decided_at=event.timestamp, **_SHREDDED)
            else:  # _FORGOTTEN
                forgotten.append(key)
                for candidate_id in about.get(key, ()):
                    rows.update(candidate_id, **_SHREDDED)
        if forgotten:
            # Rows stored before this batch that name a forgotten memory; the changes of this
            # batch (written next) were shredded above, as each Forgotten came.
            cur.execute(
                SQL(
                    "UPDATE {} SET proposed_key = %s, proposed_content = %s"
                    " WHERE partition = %s"
                    " AND (target_memory_id = ANY(%s) OR resulting_memory_id = ANY(%s))"
                ).format(table),
                (b"", b"", partition, forgotten, forgotten),
            )
        _seal(rows, t.seal)
        rows.flush(cur)


_SEALED = ("proposed_key", "proposed_content")
_TABLE = "candidates"


def _seal(rows: RowChanges, seal: RowSeal) -> None:
    """Seal the proposals of this batch's new and changed rows (REDACTED: b"")."""
    for changes in (rows.new, rows.updates):
        for candidate_id, values in changes.items():
            for column in _SEALED:
                if column in values:
                    text = values[column]
                    values[column] = seal.seal(_TABLE, candidate_id, candidate_id, column, text)


_PROPOSED, _ACCEPTED, _REJECTED, _EXPIRED, _FORGOTTEN, _OTHER = range(6)
_KINDS = EventKinds(
    (
        (MemoryCandidate.Proposed, _PROPOSED),
        (MemoryCandidate.Accepted, _ACCEPTED),
        (MemoryCandidate.Rejected, _REJECTED),
        (MemoryCandidate.Expired, _EXPIRED),
        (Memory.Forgotten, _FORGOTTEN),
    ),
    _OTHER,
)


def in_status(src: ReadSource, user_id: str, status: str) -> list[CandidateState]:
    """The user's candidates in one status, newest first (shredded proposals REDACTED); the
    table holds exactly a `CandidateState`'s fields."""
    rows = src.all(
        SQL(
            "SELECT candidate_id, {} FROM {} WHERE partition = %s AND user_id = %s"
            " AND status = %s ORDER BY created_at DESC, candidate_id"
        ).format(SQL(", ").join(map(Identifier, COLUMNS)), src.t["candidates"]),
        (src.partition(user_id), user_id, status),
    )
    return [
        CandidateState(**row) for row in src.t.seal.open_rows(rows, _TABLE, "candidate_id", _SEALED)
    ]
