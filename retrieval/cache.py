"""The short-TTL search cache of CORE_MEMORY_DESIGN.md section 16 and its freshness snapshot.

Key (`SearchKey`): user, workspace, visible scopes, the normalised query (content form and key
form, the two forms the ranker reads), category, limit, the user's memory revision and the
ranker's retrieval version; never user + query alone. Permission is decided before the cache
is consulted (the tool's policy check), and the visible scopes are part of the key, so an entry
can only be served to a turn that may see every scope it was computed from.

Freshness rules, each enough to make an entry unreachable:

1. Revision: every event on one of the user's memories (create, update, suppress, restore,
   confirm, reschedule, forget) advances `user_revisions`, so the key changes and older
   entries are never looked up again. A forgotten memory therefore never comes back: a search
   that follows the forget (the API waits for the caller's own writes before reading) reads
   the new revision, and entries made before it are keyed by the old one.
2. Consistency between projections: `user_revisions` and `active_memories` are applied in
   separate transactions (possibly by different workers). An entry is served only while the
   revision table is at least as far along the ledger as the memories table (so the revision
   accounts for every change the rows could show) and stored only while the memories table is
   at least as far along as the revision table (so the rows are as new as the key says).
   Between the two transactions of one batch the cache is simply bypassed: a miss, never a
   stale answer.
3. Time: expiry and review dates change results without any event. An entry is valid at most
   until the earliest `expires_at` or `review_after` (still in the future) among the memories
   it was computed from, checked against the ledger clock, and never longer than the TTL.
4. TTL (60 s by default) and a size bound (least recently used entries go first).

The cache assumes the ranker reads the query only through `Query` (its normalised forms); a
ranker that reads more must say so by changing its `version`. `retrieval.search.MemorySearch`
applies these rules: `read_revision` is the one snapshot rules 1 and 2 read, `fresh_until`
the one deadline of rule 3.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

from psycopg.sql import SQL

from domain.model.values import Scope
from projections.reads import Reads
from projections.tracking import TRACKING
from retrieval.query import Query

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_TTL",
    "QueryCache",
    "RevisionSnapshot",
    "SearchKey",
    "fresh_until",
    "read_revision",
]

DEFAULT_TTL: Final = 60.0
DEFAULT_MAX_ENTRIES: Final = 10_000

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class SearchKey:
    """Everything a search result depends on (section 16)."""

    user_id: str
    workspace: str
    scopes: tuple[str, ...]
    query: str
    memory_key: str
    """The query read as a memory key (`Query.memory_key`)."""
    category: str | None
    limit: int
    revision: int
    retrieval_version: str

    @classmethod
    def of(
        cls,
        *,
        user_id: str,
        workspace: str,
        scopes: Iterable[Scope],
        query: Query,
        category: str | None,
        limit: int,
        revision: int,
        retrieval_version: str,
    ) -> SearchKey:
        """The key of a search; the query in its normalised forms, scopes in a stable order."""
        return cls(
            user_id,
            workspace,
            tuple(sorted(s.label() for s in scopes)),
            query.normal,
            query.memory_key,
            category,
            limit,
            revision,
            retrieval_version,
        )


@dataclass(slots=True)
class _Entry(Generic[V]):
    deadline: float
    fresh_until: datetime | None
    value: V


class QueryCache(Generic[K, V]):
    """A thread-safe in-process TTL cache with a size bound (LRU) and per-entry time bounds.

    `ttl` <= 0 turns it off (nothing is stored). `clock` is monotonic seconds; the optional
    `fresh_until` of an entry is compared with the `now` given to `get` (the ledger clock).
    """

    def __init__(
        self,
        ttl: float = DEFAULT_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, _Entry[V]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """False when the TTL is 0 (the cache is off)."""
        return self.ttl > 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, key: K, *, now: datetime | None = None) -> V | None:
        """The value stored under `key` if still fresh, else None (and the entry is dropped)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and (
                self.clock() >= entry.deadline
                or (entry.fresh_until is not None and now is not None and now >= entry.fresh_until)
            ):
                del self._entries[key]
                entry = None
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry.value

    def put(self, key: K, value: V, *, fresh_until: datetime | None = None) -> None:
        """Store `value` for at most the TTL, and (if given) only until `fresh_until`."""
        if not self.enabled:
            return
        with self._lock:
            self._entries[key] = _Entry(self.clock() + self.ttl, fresh_until, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()


# -- the revision ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RevisionSnapshot:
    """The user's memory revision, and whether the two projections involved agree with it.

    `may_serve`: the revision accounts for every change the memories table shows (the
    revisions projection is at least as far as the memories one). `may_store`: rows read from
    now on are at least as new as the revision (the other way round).
    """

    revision: int
    may_serve: bool
    may_store: bool

    @classmethod
    def at(cls, revision: int, revisions_position: int, memories_position: int) -> RevisionSnapshot:
        """The snapshot of one partition, from both projections' positions in it."""
        return cls(
            revision,
            revisions_position >= memories_position,
            memories_position >= revisions_position,
        )


def read_revision(reads: Reads, user_id: str) -> RevisionSnapshot:
    """One statement (one snapshot): the user's revision and both projections' positions in
    the user's ledger partition."""
    t = reads.t
    query = SQL(
        "SELECT (SELECT revision FROM {r} WHERE partition = %s AND user_id = %s),"
        " (SELECT position FROM {p} WHERE partition = %s AND projection = 'user_revisions'),"
        " (SELECT position FROM {p} WHERE partition = %s AND projection = 'active_memories')"
    ).format(r=t["user_revisions"], p=t[TRACKING])
    partition = reads.partition(user_id)
    with reads.pool.connection() as conn:
        row = conn.execute(query, (partition, user_id, partition, partition)).fetchone()
    assert row is not None
    return RevisionSnapshot.at(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))


def fresh_until(
    rows: Sequence[Mapping[str, Any]], now: datetime, hiding: datetime | None
) -> datetime | None:
    """Rule 3: the first time after `now` at which a row expires or falls due for review, or
    `hiding` (when a workspace memory that hides a global one expires), whichever is first."""
    times = [
        value
        for row in rows
        for value in (row.get("expires_at"), row.get("review_after"))
        if value is not None and value > now
    ]
    if hiding is not None:
        times.append(hiding)
    return min(times, default=None)
