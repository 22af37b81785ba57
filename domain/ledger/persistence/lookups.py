"""Look-ups in the claim and fingerprint tables that commands make before they write.

Each names the partition of the user whose rows it reads (on Citus: one shard)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from psycopg.sql import SQL

from domain.ledger.persistence import reads
from domain.ledger.persistence.reads import Connections
from domain.ledger.persistence.tables import FINGERPRINTS, KEY_CLAIMS, table

__all__ = ["Lookups"]


class Lookups:
    """One-statement reads of `key_claims` and `candidate_fingerprints` (autocommit, retried)."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        schema = connections.schema or "public"
        claims, prints = table(schema, KEY_CLAIMS), table(schema, FINGERPRINTS)
        self._sql_claim_holder = reads.render(
            SQL("SELECT memory_id FROM {} WHERE partition = %s AND claim = %s").format(claims)
        )
        self._sql_stored_print = reads.render(
            SQL("SELECT fingerprint FROM {} WHERE partition = %s AND candidate_id = %s").format(
                prints
            )
        )
        self._sql_known_proposal = reads.render(
            SQL(
                "SELECT state, candidate_id FROM {} WHERE partition = %s AND user_id = %s"
                " AND fingerprint = %s"
                " AND (state = 'pending' OR (state = 'rejected' AND changed_at > %s))"
                " ORDER BY state = 'pending' DESC LIMIT 1"
            ).format(prints)
        )

    def claim_holder(self, partition: int, claim: str) -> UUID | None:
        """The memory holding this key claim (in its user's partition), if any."""
        row = reads.fetch_one(self.connections, self._sql_claim_holder, (partition, claim))
        return None if row is None else row["memory_id"]

    def stored_fingerprint(self, partition: int, candidate_id: UUID) -> str:
        """The fingerprint stored for a candidate ("" when there is none)."""
        row = reads.fetch_one(self.connections, self._sql_stored_print, (partition, candidate_id))
        return row["fingerprint"] if row else ""

    def known_proposal(
        self, partition: int, user_id: str, fingerprint: str, rejected_since: datetime
    ) -> tuple[str, UUID] | None:
        """(state, candidate id) of a pending proposal with this fingerprint, else of one
        rejected after `rejected_since`; None when there is neither."""
        row = reads.fetch_one(
            self.connections,
            self._sql_known_proposal,
            (partition, user_id, fingerprint, rejected_since),
        )
        return None if row is None else (row["state"], row["candidate_id"])
