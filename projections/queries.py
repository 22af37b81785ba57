"""Reads over the projections, for the API: memories, versions, candidates, audit, tombstones."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row
from psycopg.sql import SQL, Composed
from psycopg_pool import ConnectionPool

from domain.model.values import Scope
from projections.tables import Tables
from projections.views.active_memories import COLUMNS as MEMORY_COLUMNS
from projections.views.profile_changes import TABLE as PROFILE_CHANGES
from projections.views.profile_rules import FIELDS
from retrieval.fetch import fetch_candidates
from retrieval.lexical import MAX_LIMIT

__all__ = ["InvalidCursor", "Page", "Reads"]

_MAX_CHANGES = len(FIELDS)  # profile changes one event can cause: one per field at most
_MEMORY = SQL(", ").join(SQL(c) for c in ("memory_id", *MEMORY_COLUMNS))


class InvalidCursor(ValueError):
    """A pagination cursor that this API did not hand out."""


@dataclass(frozen=True, slots=True)
class Page:
    """A page of rows and the cursor of the next page (None when done)."""

    items: list[dict[str, Any]]
    next_cursor: str | None


def _encode_cursor(created_at: datetime, memory_id: UUID) -> str:
    raw = json.dumps([created_at.isoformat(), str(memory_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, memory_id = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(created_at), UUID(memory_id)
    except (ValueError, TypeError) as error:
        raise InvalidCursor("cursor is not one this API returned") from error


class Reads:
    """Queries over the live projection tables (callers wait for positions beforehand)."""

    def __init__(self, pool: ConnectionPool[Any], schema: str) -> None:
        self.pool = pool
        self.t = Tables(schema)

    def _all(self, query: Composed, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def memory(self, user_id: str, memory_id: UUID) -> dict[str, Any] | None:
        """One live memory of the user, or None."""
        rows = self._all(
            SQL("SELECT {} FROM {} WHERE memory_id = %s AND user_id = %s").format(
                _MEMORY, self.t["active_memories"]
            ),
            (memory_id, user_id),
        )
        return rows[0] if rows else None

    def is_forgotten(self, user_id: str, memory_id: UUID) -> bool:
        """True when the user forgot this memory (its tombstone is theirs)."""
        rows = self._all(
            SQL("SELECT 1 AS x FROM {} WHERE memory_id = %s AND user_id = %s").format(
                self.t["tombstones"]
            ),
            (memory_id, user_id),
        )
        return bool(rows)

    def memories(
        self,
        user_id: str,
        *,
        scope_type: str | None = None,
        workspace_type: str | None = None,
        status: str | None = None,
        category: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """The user's live memories, oldest first, keyset-paginated."""
        where = [SQL("user_id = %s")]
        params: list[Any] = [user_id]
        for column, value in (
            ("scope_type", scope_type),
            ("workspace_type", workspace_type),
            ("status", status),
            ("category", category),
        ):
            if value is not None:
                where.append(SQL(f"{column} = %s"))
                params.append(value)
        if cursor:
            created_at, memory_id = _decode_cursor(cursor)
            where.append(SQL("(created_at, memory_id) > (%s, %s)"))
            params += [created_at, memory_id]
        rows = self._all(
            SQL("SELECT {} FROM {} WHERE {} ORDER BY created_at, memory_id LIMIT %s").format(
                _MEMORY, self.t["active_memories"], SQL(" AND ").join(where)
            ),
            (*params, limit + 1),
        )
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if more else None
        return Page(rows, _encode_cursor(last["created_at"], last["memory_id"]) if last else None)

    def versions(self, user_id: str, memory_id: UUID) -> list[dict[str, Any]]:
        """Every revision of a live memory, ascending."""
        return self._all(
            SQL(
                "SELECT revision, content, category, scope_type, workspace_type, change_type,"
                " changed_via, source_candidate_id, created_at FROM {}"
                " WHERE memory_id = %s AND user_id = %s ORDER BY revision"
            ).format(self.t["memory_versions"]),
            (memory_id, user_id),
        )

    def candidates(self, user_id: str, status: str) -> list[dict[str, Any]]:
        """The user's candidates in one status, newest first."""
        return self._all(
            SQL(
                "SELECT * FROM {} WHERE user_id = %s AND status = %s"
                " ORDER BY created_at DESC, candidate_id"
            ).format(self.t["candidates"]),
            (user_id, status),
        )

    def audit(
        self,
        *,
        after: int,
        limit: int,
        user_id: str | None = None,
        memory_id: UUID | None = None,
    ) -> list[dict[str, Any]]:
        """Audit rows after a position, ascending; never content or keys.

        Each ledger event's row is followed by the profile changes it caused (same position,
        `memory.projection_created` / `_removed`, from the profile projection). A page never
        splits one position's rows, so paging by position loses none: when the `limit`-th row
        is not its position's last, that position is left for the next page, unless it is the
        page's only one (then all its rows come, a few more than `limit`).
        """
        where = [SQL("position > %s")]
        params: list[Any] = [after]
        if user_id is not None:
            where.append(SQL("user_id = %s"))
            params.append(user_id)
        if memory_id is not None:
            where.append(SQL("memory_id = %s"))
            params.append(memory_id)
        condition = SQL(" AND ").join(where)
        query = SQL(
            "SELECT position, 0 AS seq, event_id, event_type, memory_id, user_id, scope_type,"
            " workspace_type, revision, content_hash, occurred_at, request_id FROM {audit}"
            " WHERE {condition}"
            " UNION ALL SELECT position, seq, event_id, event_type, memory_id, user_id,"
            " scope_type, workspace_type, revision, NULL, occurred_at, request_id FROM {changes}"
            " WHERE {condition} ORDER BY position, seq LIMIT %s"
        ).format(audit=self.t["audit_log"], changes=self.t[PROFILE_CHANGES], condition=condition)
        rows = self._all(query, (*params, *params, limit + 1))
        if len(rows) > limit:
            last = rows[limit]["position"]
            rows = [r for r in rows[:limit] if r["position"] != last]
            if not rows:  # one position holds more rows than the limit: return them all
                rows = self._all(query, (*params, *params, limit + _MAX_CHANGES + 1))
                rows = [r for r in rows if r["position"] == last]
        for row in rows:
            del row["seq"]
        return rows

    def expired_count(self) -> int:
        """How many live memories are past their expiry (a section 17 metric)."""
        rows = self._all(
            SQL("SELECT count(*) AS n FROM {} WHERE expires_at <= now()").format(
                self.t["active_memories"]
            ),
            (),
        )
        return int(rows[0]["n"])

    def user_revision(self, user_id: str) -> int:
        """The user's memory revision (0 before any memory event)."""
        rows = self._all(
            SQL("SELECT revision FROM {} WHERE user_id = %s").format(self.t["user_revisions"]),
            (user_id,),
        )
        return int(rows[0]["revision"]) if rows else 0

    # -- agent tools (search_core_memories, list_core_memories, propose_core_memory) ------------

    def retrievable_memories(
        self,
        user_id: str,
        scopes: Sequence[Scope],
        *,
        now: datetime,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        """The user's active, unexpired memories in these scopes, newest first (at most `limit`)."""
        if not scopes:
            return []
        in_scope = SQL(" OR ").join(
            SQL("(scope_type = %s AND workspace_type IS NOT DISTINCT FROM %s)") for _ in scopes
        )
        return self._all(
            SQL(
                "SELECT {} FROM {} WHERE user_id = %s AND status = 'active'"
                " AND (expires_at IS NULL OR expires_at > %s) AND ({})"
                " ORDER BY updated_at DESC, memory_id LIMIT %s"
            ).format(_MEMORY, self.t["active_memories"], in_scope),
            (
                user_id,
                now,
                *(v for s in scopes for v in (s.scope_type, s.workspace_type)),
                limit,
            ),
        )

    def search_candidates(
        self,
        user_id: str,
        scopes: Sequence[Scope],
        query: str,
        *,
        now: datetime,
        category: str | None = None,
        limit: int = MAX_LIMIT,
    ) -> list[dict[str, Any]]:
        """The few rows `search` needs to rank `query` exactly, with their `terms` and `key_terms`.

        From the search_terms projection: the user's active, unexpired, visible memories (a
        global one hidden by a visible workspace one with its key left out, as `shadow_global`
        would) that can rank within the first `limit`; see retrieval/fetch.py.
        """
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return fetch_candidates(
                cur,
                self.t["search_terms"],
                user_id,
                scopes,
                query,
                now=now,
                category=category,
                limit=limit,
            )

    def next_shadow_expiry(
        self, user_id: str, scopes: Sequence[Scope], now: datetime
    ) -> datetime | None:
        """When the first of the user's visible, active workspace memories expires (or None).

        A workspace memory hides the global one with its key; when it expires, without any
        event, the global one becomes visible, so a cached search result must not outlive it.
        """
        workspaces = [s.workspace_type for s in scopes if s.scope_type == "workspace"]
        if not workspaces:
            return None
        rows = self._all(
            SQL(
                "SELECT min(expires_at) AS at FROM {} WHERE user_id = %s AND status = 'active'"
                " AND scope_type = 'workspace' AND workspace_type = ANY(%s)"
                " AND expires_at > %s"
            ).format(self.t["search_terms"]),
            (user_id, workspaces, now),
        )
        return rows[0]["at"] if rows else None

    def memory_by_key(self, user_id: str, scope: Scope, memory_key: str) -> dict[str, Any] | None:
        """The live memory (active or suppressed) holding a normalised key in a scope, or None."""
        rows = self._all(
            SQL(
                "SELECT {} FROM {} WHERE user_id = %s AND scope_type = %s"
                " AND workspace_type IS NOT DISTINCT FROM %s AND memory_key = %s LIMIT 1"
            ).format(_MEMORY, self.t["active_memories"]),
            (user_id, scope.scope_type, scope.workspace_type, memory_key),
        )
        return rows[0] if rows else None

    def forgotten_scope(self, user_id: str, memory_id: UUID) -> Scope | None:
        """The scope a memory of this user had when it was forgotten; None if not forgotten."""
        rows = self._all(
            SQL(
                "SELECT scope_type, workspace_type FROM {} WHERE memory_id = %s AND user_id = %s"
                " AND event_type = 'memory.deleted' LIMIT 1"
            ).format(self.t["audit_log"]),
            (memory_id, user_id),
        )
        return Scope(rows[0]["scope_type"], rows[0]["workspace_type"]) if rows else None
