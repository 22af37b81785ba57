"""The SQL of the data-key table: insert a user's key, look keys up, count them, re-wrap them.

`DataKeyStore` (domain/ledger/keystore.py) owns the caching and the crypto; this module only
reads and writes rows. Keys are inserted and deleted with events by `LedgerRecorder`.

Statements about one user's or one memory's keys name their partition (on Citus: one shard).
Reading keys by id (`wrapped`, `set_checks`) does not: a key id alone does not tell its
partition, and those reads fan out over the shards (correct, one statement per batch of ids).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from psycopg.sql import SQL

from domain.ledger.persistence import reads
from domain.ledger.persistence.reads import Connections
from domain.ledger.persistence.tables import DATA_KEYS, table

__all__ = ["KeyTable", "Rewrap"]

Rewrap = Callable[[str, UUID, bytes], tuple[str, bytes]]
"""(master key id, key id, wrapped) -> the same key wrapped under the active master key."""


class KeyTable:
    """The rows of `memledger_data_keys` in one schema, read through `connections`."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self._table = table(connections.schema or "public", DATA_KEYS)
        self._sql_insert_user_key = reads.render(
            SQL(
                "INSERT INTO {} (partition, key_id, user_id, kind, master_key_id, wrapped,"
                " key_check) VALUES (%s, %s, %s, 'user', %s, %s, %s)"
                " ON CONFLICT (partition, key_id) DO NOTHING"
            ).format(self._table)
        )
        self._sql_select_keys = reads.render(
            SQL(
                "SELECT key_id, master_key_id, wrapped, key_check FROM {} WHERE key_id = ANY(%s)"
            ).format(self._table)
        )
        self._sql_set_checks = reads.render(
            SQL(
                "UPDATE {0} SET key_check = c.key_check FROM unnest(%s::uuid[], %s::bytea[])"
                " AS c (key_id, key_check) WHERE {0}.key_id = c.key_id AND {0}.key_check IS NULL"
            ).format(self._table)
        )
        self._sql_owned_keys = reads.render(
            SQL("SELECT key_id FROM {} WHERE partition = %s AND user_id = %s AND kind = %s").format(
                self._table
            )
        )
        self._sql_about = reads.render(
            SQL(
                "SELECT key_id FROM {} WHERE partition = %s AND subject_memory_id = %s"
                " AND kind = 'candidate'"
            ).format(self._table)
        )
        self._sql_count_held = reads.render(
            SQL(
                "SELECT count(*) AS n FROM {} WHERE partition = %s"
                " AND (key_id = ANY(%s) OR subject_memory_id = ANY(%s))"
            ).format(self._table)
        )

        self._sql_count_by_master = reads.render(
            SQL("SELECT master_key_id, count(*) AS n FROM {} GROUP BY master_key_id").format(
                self._table
            )
        )

    def insert_user_key(
        self,
        partition: int,
        key_id: UUID,
        user_id: str,
        master_id: str,
        wrapped: bytes,
        check: bytes,
    ) -> None:
        """Insert a user's key unless one is there already (the first insert wins)."""
        reads.execute(
            self.connections,
            self._sql_insert_user_key,
            (partition, key_id, user_id, master_id, wrapped, check),
        )

    def wrapped(self, key_ids: Iterable[UUID]) -> list[tuple[UUID, str, bytes, bytes | None]]:
        """(key id, master key id, wrapped key, check value or None when the row was written
        before checks were kept) of each of these keys that still exists."""
        rows = reads.fetch_all(self.connections, self._sql_select_keys, (list(key_ids),))
        return [
            (
                row["key_id"],
                row["master_key_id"],
                bytes(row["wrapped"]),
                None if row["key_check"] is None else bytes(row["key_check"]),
            )
            for row in rows
        ]

    def set_checks(self, checks: dict[UUID, bytes]) -> None:
        """Store the check values of keys written before checks were kept (idempotent)."""
        if checks:
            ids = list(checks)
            reads.execute(self.connections, self._sql_set_checks, (ids, [checks[i] for i in ids]))

    def owned(self, partition: int, user_id: str, kind: str) -> list[UUID]:
        """Ids of the live keys of one kind that belong to a user (in their partition)."""
        rows = reads.fetch_all(self.connections, self._sql_owned_keys, (partition, user_id, kind))
        return [row["key_id"] for row in rows]

    def about(self, partition: int, memory_id: UUID) -> list[UUID]:
        """Ids of the candidate keys that name this memory (in its partition)."""
        rows = reads.fetch_all(self.connections, self._sql_about, (partition, memory_id))
        return [row["key_id"] for row in rows]

    def count_held(self, partition: int, aggregate_ids: list[UUID]) -> int:
        """How many keys exist for these aggregates of one partition or for candidates about
        them."""
        row = reads.fetch_one(
            self.connections, self._sql_count_held, (partition, aggregate_ids, aggregate_ids)
        )
        return int(row["n"]) if row else 0

    def count_by_master_key(self) -> dict[str, int]:
        """How many data keys are wrapped under each master key id (ids with none left out)."""
        rows = reads.fetch_all(self.connections, self._sql_count_by_master)
        return {row["master_key_id"]: int(row["n"]) for row in rows}

    def rewrap(self, partition: int, active_id: str, batch_size: int, rewrap: Rewrap) -> int:
        """Re-wrap up to `batch_size` keys of one partition not under `active_id`, in one
        transaction; how many.

        Rows another rotation holds are skipped, never waited for. One partition a batch: on
        Citus, SELECT ... FOR UPDATE runs only on one shard (a router query).
        """
        with (
            self.connections.get_connection() as conn,
            conn.transaction(),
            conn.cursor() as curs,
        ):
            curs.execute(
                SQL(
                    "SELECT key_id, master_key_id, wrapped FROM {} WHERE partition = %s"
                    " AND master_key_id <> %s LIMIT %s FOR UPDATE SKIP LOCKED"
                ).format(self._table),
                (partition, active_id, batch_size),
            )
            rows: list[Any] = curs.fetchall()
            for row in rows:
                master_id, wrapped = rewrap(
                    row["master_key_id"], row["key_id"], bytes(row["wrapped"])
                )
                curs.execute(
                    SQL(
                        "UPDATE {} SET master_key_id = %s, wrapped = %s"
                        " WHERE partition = %s AND key_id = %s"
                    ).format(self._table),
                    (master_id, wrapped, partition, row["key_id"]),
                )
        return len(rows)
