"""Candidates: pending and decided proposals; shredded proposals read as REDACTED."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Cursor
from psycopg.sql import SQL, Composed

from domain.model.candidate import MemoryCandidate
from domain.model.events import REDACTED
from domain.model.memory import Memory
from projections.base import Projection
from projections.envelope import Envelope
from projections.tables import Tables
from projections.views._rows import RowChanges

__all__ = ["Candidates"]

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
_SHREDDED = {"proposed_key": REDACTED, "proposed_content": REDACTED}


class Candidates(Projection):
    """One row per candidate; forgetting a memory shreds the candidates about it."""

    name = "candidates"
    tables = ("candidates",)

    def create(self, t: Tables) -> list[Composed]:
        table = t["candidates"]
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " candidate_id uuid PRIMARY KEY,"
                " user_id text NOT NULL,"
                " operation text NOT NULL,"
                " target_memory_id uuid NULL,"
                " expected_revision integer NULL,"
                " proposed_scope_type text NOT NULL,"
                " proposed_workspace_type text NULL,"
                " proposed_key text NOT NULL,"
                " proposed_content text NOT NULL,"
                " proposed_category text NOT NULL,"
                " source_conversation_id text NULL,"
                " status text NOT NULL,"
                " resulting_memory_id uuid NULL,"
                " created_at timestamptz NOT NULL,"
                " decided_at timestamptz NULL,"
                " expires_at timestamptz NOT NULL)"
            ).format(table),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (user_id, status, created_at)").format(
                t.index("candidates", "user_status"), table
            ),
            SQL("CREATE INDEX IF NOT EXISTS {} ON {} (status, expires_at)").format(
                t.index("candidates", "due"), table
            ),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        table = t["candidates"]
        rows = RowChanges(table, "candidate_id", COLUMNS)
        forgotten = []
        for envelope in batch:
            event, key = envelope.event, envelope.originator_id
            match event:
                case MemoryCandidate.Proposed():
                    rows.insert(
                        key,
                        {c: getattr(event, c, None) for c in COLUMNS}
                        | {
                            "status": "pending",
                            "created_at": event.timestamp,
                            "resulting_memory_id": None,
                            "decided_at": None,
                        },
                    )
                case MemoryCandidate.Accepted():
                    rows.update(
                        key,
                        status="accepted",
                        decided_at=event.timestamp,
                        resulting_memory_id=event.resulting_memory_id,
                    )
                case MemoryCandidate.Rejected():
                    rows.update(key, status="rejected", decided_at=event.timestamp, **_SHREDDED)
                case MemoryCandidate.Expired():
                    rows.update(key, status="expired", decided_at=event.timestamp, **_SHREDDED)
                case Memory.Forgotten():
                    forgotten.append(key)
                    for candidate_id, row in rows.new.items():
                        if key in (row["target_memory_id"], row["resulting_memory_id"]):
                            rows.update(candidate_id, **_SHREDDED)
                case _:
                    pass
        rows.flush(cur)
        if forgotten:
            cur.execute(
                SQL(
                    "UPDATE {} SET proposed_key = %s, proposed_content = %s"
                    " WHERE target_memory_id = ANY(%s) OR resulting_memory_id = ANY(%s)"
                ).format(table),
                (REDACTED, REDACTED, forgotten, forgotten),
            )
