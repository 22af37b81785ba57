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

from domain.model.text import normalise_key
from domain.model.values import Scope
from projections.profile_rules import FIELDS
from projections.search import MAX_LIMIT, named_categories, query_terms
from projections.tables import Tables
from projections.views.active_memories import COLUMNS as MEMORY_COLUMNS
from projections.views.profile_changes import TABLE as PROFILE_CHANGES
from projections.views.search_terms import COLUMNS as SEARCH_COLUMNS
from projections.views.search_terms import SEP

__all__ = ["InvalidCursor", "Page", "Reads"]

_MAX_CHANGES = len(FIELDS)  # profile changes one event can cause: one per field at most
_MEMORY = SQL(", ").join(SQL(c) for c in ("memory_id", *MEMORY_COLUMNS))
_SEARCH = SQL(", ").join(SQL(c) for c in SEARCH_COLUMNS if c not in ("terms", "key_terms"))


def _scopes(alias: str, count: int) -> Composed:
    """`(scope_type, workspace_type)` is one of `count` scopes passed as %(s<i>)s, %(w<i>)s."""
    return SQL(" OR ").join(
        SQL(
            f"({alias}scope_type = %(s{i})s"
            f" AND {alias}workspace_type IS NOT DISTINCT FROM %(w{i})s)"
        )
        for i in range(count)
    )


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
        """The rows `search` can return for `query`, with their stored `terms` and `key_terms`.

        From the search_terms projection: the user's active, unexpired memories in these scopes
        (a global one hidden by a visible workspace one with its key is left out, as
        `shadow_global` would) that share a query term (GIN), hold the query as key or belong
        to a category the query names. All that hold the key or every query term (only those
        can contain the query as a phrase) are kept; of the others, whose order the ranker
        decides on matched term weight, key term weight, category, review state, age and id
        alone (all computed here), only the first `limit`: no other can be returned.
        """
        if not scopes:
            return []
        weights = query_terms(query)
        prefix = user_id + SEP
        live = SQL(
            "user_id = %(user)s AND status = 'active'"
            " AND (expires_at IS NULL OR expires_at > %(now)s) AND ({})"
        ).format(_scopes("", len(scopes)))
        # Matched weights, as the ranker sums them: one array test per query term (few).
        matched = SQL(" + ").join(
            SQL(f"CASE WHEN %(p{i})s = ANY(terms) THEN {w:d} ELSE 0 END")
            for i, w in enumerate(weights.values())
        )
        key_matched = SQL(" + ").join(
            SQL(f"CASE WHEN %(t{i})s = ANY(key_terms) THEN {w:d} ELSE 0 END")
            for i, w in enumerate(weights.values())
        )
        query_sql = SQL(
            "WITH m AS ("
            " SELECT memory_id, {columns}, terms, key_terms,"
            " {matched} AS matched, {key_matched} AS key_matched"
            " FROM {table} s WHERE {live}"
            " AND (terms && %(terms)s OR memory_key = %(key)s OR category = ANY(%(named)s))"
            " AND (%(category)s::text IS NULL OR category = %(category)s)"
            " AND NOT (scope_type = 'global' AND EXISTS (SELECT 1 FROM {table} w"
            "  WHERE w.user_id = s.user_id AND w.memory_key = s.memory_key"
            "  AND w.scope_type = 'workspace' AND w.status = 'active'"
            "  AND (w.expires_at IS NULL OR w.expires_at > %(now)s) AND ({w_scope}))))"
            " SELECT * FROM m WHERE memory_key IS NOT DISTINCT FROM %(key)s"
            " OR (%(total)s > 0 AND matched >= %(total)s)"
            " UNION ALL (SELECT * FROM m WHERE memory_key IS DISTINCT FROM %(key)s"
            " AND NOT (%(total)s > 0 AND matched >= %(total)s)"
            " ORDER BY matched DESC, key_matched DESC, category = ANY(%(named)s) DESC,"
            " coalesce(review_after <= %(now)s AND (last_confirmed_at IS NULL"
            " OR last_confirmed_at < review_after), false),"
            " updated_at DESC, memory_id LIMIT %(limit)s)"
        ).format(
            columns=_SEARCH,
            matched=matched if weights else SQL("0"),
            key_matched=key_matched if weights else SQL("0"),
            table=self.t["search_terms"],
            live=live,
            w_scope=_scopes("w.", len(scopes)),
        )
        named_params: dict[str, Any] = {
            "user": user_id,
            "now": now,
            "terms": [prefix + t for t in weights],
            "key": normalise_key(query) or None,
            "named": list(named_categories(query)),
            "category": category,
            "total": sum(weights.values()),
            "limit": max(1, limit),
        }
        for i, term in enumerate(weights):
            named_params[f"p{i}"] = prefix + term
            named_params[f"t{i}"] = term
        for i, scope in enumerate(scopes):
            named_params[f"s{i}"] = scope.scope_type
            named_params[f"w{i}"] = scope.workspace_type
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            # Not prepared: a generic plan cannot see how selective the terms are.
            rows = cur.execute(query_sql, named_params, prepare=False).fetchall()
        cut = len(prefix)
        for row in rows:
            row["terms"] = [term[cut:] for term in row["terms"]]
        return rows

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
