"""Profile: the small structured user view of design section 6, derived from memories.

`profile_sources` holds one row per (memory, field) that `projections.views.profile_rules` derives
from a live memory, with the memory's owner and scope. `profile_memories` keeps, per live
memory, what later events do not repeat: whether it is suppressed, when it expires, and its
key when the key names a profile field (the exact-key rule needs it when the content changes;
other keys are not copied). Suppressing a memory keeps its rows with active=false, so
restoring it needs no content; forgetting it deletes them; an expired memory stops counting
at query time. `updated_at` is when the source's value was last asserted: created, changed or
confirmed (suppression and restoration do not count).

The profile is a derived cache, never a source of truth; a rule that fails yields nothing
(see `profile_rules.derive`), and a projection that fails is retried by the worker without
holding back the other projections or any write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import Connection, Cursor
from psycopg.sql import SQL, Composed

from domain.model.events import REDACTED
from domain.model.values import SOURCE_TYPES, Scope
from projections.base import Projection
from projections.envelope import Envelope
from projections.memory_kinds import CONFIRMED as _CONFIRMED
from projections.memory_kinds import CONTENT as _CONTENT
from projections.memory_kinds import CREATED as _CREATED
from projections.memory_kinds import FORGOTTEN as _FORGOTTEN
from projections.memory_kinds import MEMORY_KINDS as _KINDS
from projections.memory_kinds import OTHER as _OTHER
from projections.memory_kinds import RESTORED as _RESTORED
from projections.memory_kinds import SCHEDULE as _SCHEDULE
from projections.memory_kinds import SUPPRESSED as _SUPPRESSED
from projections.sealed import RowSeal, vacuum_promptly
from projections.tracking import Tables
from projections.views import profile_changes
from projections.views._rows import RowChanges, copy_rows
from projections.views.profile_rules import FIELDS, MemoryFacts, derive

__all__ = ["Profile", "ProfileField", "profile_of"]

_MEMORY_COLUMNS = ("user_id", "memory_key", "active", "expires_at")


@dataclass(frozen=True, slots=True)
class ProfileField:
    """A profile field's value and every active memory that states that value."""

    value: str
    memory_ids: list[UUID]


@dataclass(slots=True)
class _Memory:
    """What a batch knows and does to one memory's sources."""

    memory_key: str
    active: bool
    owner: tuple[str, str, str | None] = ("", "global", None)
    rows: dict[str, str] | None = None  # field -> value derived in this batch; None: keep stored
    asserted_at: datetime | None = None
    status_changed: bool = False
    fields: dict[str, str] = field(default_factory=dict)  # what it derives now (active or not)

    def effective(self) -> dict[str, str]:
        """The fields this memory feeds the profile with: none while suppressed."""
        return self.fields if self.active else {}


class Profile(Projection):
    """Profile fields per user, each keeping the memories it came from."""

    name = "profile"
    tables = ("profile_sources", "profile_memories", profile_changes.TABLE)
    stores_positions = True  # profile_changes: each change at its event's position

    def create(self, t: Tables) -> list[Composed]:
        return [
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " user_id text NOT NULL,"
                " memory_id uuid NOT NULL,"
                " field text NOT NULL,"
                " value bytea NOT NULL,"
                " scope_type text NOT NULL,"
                " workspace_type text NULL,"
                " active boolean NOT NULL,"
                " updated_at timestamptz NOT NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, memory_id, field))"
            ).format(t["profile_sources"]),
            vacuum_promptly(t["profile_sources"]),
            t.create_index("profile_sources", "user_field", "(user_id, field)"),
            SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " memory_id uuid NOT NULL,"
                " user_id text NOT NULL,"
                " memory_key text NOT NULL,"
                " active boolean NOT NULL,"
                " expires_at timestamptz NULL,"
                " partition int NOT NULL,"
                " PRIMARY KEY (partition, memory_id))"
            ).format(t["profile_memories"]),
            *profile_changes.create_statements(t),
        ]

    def apply(self, cur: Cursor[Any], t: Tables, batch: Sequence[Envelope]) -> None:
        kinds = [_KINDS(type(e.event)) for e in batch]
        partition = batch[0].partition
        stored = _stored(cur, t, batch, kinds)
        memories = RowChanges(
            t["profile_memories"], "memory_id", _MEMORY_COLUMNS, _TYPES, partition
        )
        changes = profile_changes.ProfileDiff(partition)
        state: dict[UUID, _Memory] = {}
        created: set[UUID] = set()
        forgotten: set[UUID] = set()
        for envelope, kind in zip(batch, kinds, strict=True):
            if kind == _OTHER:
                continue  # another aggregate's event, or one this version cannot read
            event, memory_id = envelope.event, envelope.originator_id
            if kind == _CREATED:
                # Keep a key only where the exact-key rule needs it: no other key is copied.
                key = event.memory_key if event.memory_key in FIELDS else ""
                state[memory_id] = _Memory(key, active=True)
                created.add(memory_id)
                memories.insert(
                    memory_id,
                    {
                        "user_id": event.user_id,
                        "memory_key": key,
                        "active": True,
                        "expires_at": event.expires_at,
                    },
                )
            memory = state.get(memory_id)
            if memory is None:
                key, active, fields = stored.get(memory_id, ("", True, {}))
                memory = state[memory_id] = _Memory(key, active, fields=fields)
            memory.owner = (event.user_id, event.scope_type, event.workspace_type)
            before = memory.effective()
            if kind in (_CREATED, _CONTENT):
                # Only explicit or confirmed memories feed the profile; the ledger admits
                # no others, and only Created says which a memory is.
                trusted = getattr(event, "source_type", "explicit") in SOURCE_TYPES
                memory.rows = memory.fields = _derive(memory, event) if trusted else {}
                memory.asserted_at = event.timestamp
            elif kind == _CONFIRMED:
                memory.asserted_at = event.timestamp
            elif kind in (_SUPPRESSED, _RESTORED):
                memory.active = kind == _RESTORED
                memory.status_changed = True
                memories.update(memory_id, active=memory.active)
            elif kind == _SCHEDULE:
                memories.update(memory_id, expires_at=event.expires_at)
            elif kind == _FORGOTTEN:
                state.pop(memory_id)
                forgotten.add(memory_id)
                memories.delete(memory_id)
                changes.forget(memory_id)
                continue
            # other memory events (future ones) leave the profile alone
            changes.record(envelope, memory.owner, before, memory.effective())
        memories.flush(cur)
        _write_sources(cur, t, partition, state, forgotten, created)
        changes.write(cur, t)


_CHANGING = frozenset((_CONTENT, _SUPPRESSED, _RESTORED, _FORGOTTEN))
_TYPES = {
    "memory_id": "uuid",
    "user_id": "text",
    "memory_key": "text",
    "active": "bool",
    "expires_at": "timestamptz",
}
_SOURCE_COLUMNS = (
    "user_id",
    "memory_id",
    "field",
    "value",
    "scope_type",
    "workspace_type",
    "active",
    "updated_at",
    "partition",
)
_SOURCE_TYPES = ("text", "uuid", "text", "bytea", "text", "text", "bool", "timestamptz", "int4")
_SOURCES = "profile_sources"


def _open_value(seal: RowSeal, memory_id: UUID, field: str, sealed: bytes) -> str:
    """A stored profile value (sealed with its memory's data key), REDACTED once shredded."""
    return seal.open(_SOURCES, f"{memory_id}/{field}", memory_id, "value", sealed)


def _derive(memory: _Memory, event: Any) -> dict[str, str]:
    facts = MemoryFacts(
        memory.memory_key, event.content, event.category, event.scope_type, event.workspace_type
    )
    return derive(facts)


def _stored(
    cur: Cursor[Any], t: Tables, batch: Sequence[Envelope], kinds: Sequence[int]
) -> dict[UUID, tuple[str, bool, dict[str, str]]]:
    """Key, status and derived fields of the memories this batch changes that began earlier."""
    created = {e.originator_id for e, kind in zip(batch, kinds, strict=True) if kind == _CREATED}
    wanted = {
        e.originator_id
        for e, kind in zip(batch, kinds, strict=True)
        if kind in _CHANGING and e.originator_id not in created
    }
    if not wanted:
        return {}
    cur.execute(
        SQL(
            "SELECT m.memory_id, m.memory_key, m.active, s.field, s.value"
            " FROM {} AS m LEFT JOIN {} AS s USING (partition, memory_id)"
            " WHERE m.partition = %s AND m.memory_id = ANY(%s)"
        ).format(t["profile_memories"], t["profile_sources"]),
        (batch[0].partition, list(wanted)),
    )
    found: dict[UUID, tuple[str, bool, dict[str, str]]] = {}
    seal = t.seal
    for memory_id, key, active, name, value in cur.fetchall():
        fields = found.setdefault(memory_id, (key, active, {}))[2]
        if name is not None:
            fields[name] = _open_value(seal, memory_id, name, value)
    return found


def _write_sources(
    cur: Cursor[Any],
    t: Tables,
    partition: int,
    state: dict[UUID, _Memory],
    forgotten: set[UUID],
    created: set[UUID],
) -> None:
    """Replace the rows of re-derived memories, then flip or re-date the rows of the others.

    Memories created in this batch have no stored rows to delete (events are applied once).
    """
    table = t["profile_sources"]
    replaced = forgotten | {m for m, memory in state.items() if memory.rows is not None}
    replaced -= created
    if replaced:
        cur.execute(
            SQL("DELETE FROM {} WHERE partition = %s AND memory_id = ANY(%s)").format(table),
            (partition, list(replaced)),
        )
    rows = []
    seal = t.seal
    for memory_id, memory in state.items():
        if memory.rows:
            user, scope, workspace = memory.owner
            for name, value in memory.rows.items():
                rows.append(
                    (
                        user,
                        memory_id,
                        name,
                        seal.seal(_SOURCES, f"{memory_id}/{name}", memory_id, "value", value),
                        scope,
                        workspace,
                        memory.active,
                        memory.asserted_at,
                        partition,
                    )
                )
    if rows:
        copy_rows(cur, table, _SOURCE_COLUMNS, _SOURCE_TYPES, rows)
    kept = [
        (memory_id, memory.active if memory.status_changed else None, memory.asserted_at)
        for memory_id, memory in state.items()
        if memory.rows is None and (memory.status_changed or memory.asserted_at is not None)
    ]
    if kept:
        ids, active, asserted = map(list, zip(*kept, strict=True))
        cur.execute(
            SQL(
                "UPDATE {} AS s SET active = COALESCE(v.active, s.active),"
                " updated_at = COALESCE(v.updated_at, s.updated_at)"
                " FROM unnest(%b::uuid[], %b::boolean[], %b::timestamptz[])"
                " AS v(memory_id, active, updated_at)"
                " WHERE s.partition = %s AND s.memory_id = v.memory_id"
            ).format(table),
            (ids, active, asserted, partition),
        )


def profile_of(
    conn: Connection[Any],
    tables: Tables,
    user_id: str,
    visible_scopes: Iterable[Scope] | None = None,
    *,
    partition: int,
    now: datetime | None = None,
) -> dict[str, ProfileField]:
    """The user's profile: per field, the value of the most recently asserted active source.

    With `visible_scopes`, only memories in those scopes count (the caller's permission
    filter); None means every scope. Memories expired at `now` (default: the database's
    clock) do not count. `partition`: the user's ledger partition.
    """
    query = SQL(
        "SELECT s.field, s.value, s.memory_id FROM {} AS s"
        " JOIN {} AS m USING (partition, memory_id)"
        " WHERE s.partition = %s AND s.user_id = %s AND s.active"
        " AND (m.expires_at IS NULL OR m.expires_at > COALESCE(%s::timestamptz, now()))"
    ).format(tables["profile_sources"], tables["profile_memories"])
    params: list[Any] = [partition, user_id, now]
    if visible_scopes is not None:
        query += SQL(
            " AND (CASE WHEN s.workspace_type IS NULL THEN s.scope_type"
            " ELSE s.scope_type || ':' || s.workspace_type END) = ANY(%s)"
        )
        params.append([scope.label() for scope in visible_scopes])
    query += SQL(" ORDER BY s.updated_at DESC, s.memory_id")
    profile: dict[str, ProfileField] = {}
    found = conn.execute(query, params).fetchall()
    seal = tables.seal
    seal.prefetch(row[2] for row in found)
    for name, sealed, memory_id in found:
        value = _open_value(seal, memory_id, name, sealed)
        if value == REDACTED:
            continue  # its memory was forgotten since (its row goes with the next batch)
        current = profile.setdefault(name, ProfileField(value, []))
        if current.value == value:
            current.memory_ids.append(memory_id)
    return profile
