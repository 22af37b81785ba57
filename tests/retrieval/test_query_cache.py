"""The search cache of section 16: its key, its TTL and bounds, and when it may be used."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID, uuid4

import pytest

from domain.model.values import Scope
from domain.policy import visible_scopes
from retrieval import search as query_cache
from retrieval.cache import QueryCache, RevisionSnapshot, SearchKey
from retrieval.fusion import WEIGHTS
from retrieval.query import Query
from retrieval.search import Found, MemorySearch, SearchResult

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Ticker:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def key(**changes: Any) -> SearchKey:
    fields: dict[str, Any] = {
        "user_id": "alice",
        "workspace": "learning",
        "scopes": visible_scopes("learning"),
        "query": "Examples",
        "category": None,
        "limit": 5,
        "revision": 3,
        "retrieval_version": "lexical-1",
    } | changes
    if isinstance(fields["query"], str):
        fields["query"] = Query.of(fields["query"])
    return SearchKey.of(**fields)


# -- the key -----------------------------------------------------------------------------------


def test_the_key_holds_every_part_section_16_names() -> None:
    k = key()

    assert (k.user_id, k.workspace, k.scopes) == (
        "alice",
        "learning",
        ("global", "workspace:learning"),
    )
    assert (k.category, k.limit, k.revision, k.retrieval_version) == (None, 5, 3, "lexical-1")


@pytest.mark.parametrize(
    "change",
    [
        {"user_id": "bob"},
        {"workspace": "research", "scopes": visible_scopes("research")},
        {"scopes": [Scope.global_()]},
        {"query": "definitions"},
        {"category": "preference"},
        {"limit": 6},
        {"revision": 4},
        {"retrieval_version": "hybrid-1"},
    ],
)
def test_any_part_changing_changes_the_key(change: dict[str, Any]) -> None:
    assert key(**change) != key()


@pytest.mark.parametrize(
    "query",
    ["examples", "  EXAMPLES ", "Examples.", "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff53"],
)
def test_queries_with_the_same_normalised_forms_share_a_key(query: str) -> None:
    assert key(query=query) == key(query="examples")


def test_a_space_next_to_cjk_keeps_its_own_key_because_the_key_form_differs() -> None:
    # normalise_content drops it, normalise_key does not: the ranker's key match could differ.
    assert key(query="使用 python") != key(query="使用python")


def test_scope_order_does_not_matter() -> None:
    scopes = visible_scopes("teaching")
    assert key(scopes=scopes) == key(scopes=list(reversed(scopes)))


# -- the cache ---------------------------------------------------------------------------------


def test_a_stored_value_is_served_until_the_ttl() -> None:
    ticker = Ticker()
    cache: QueryCache[str, int] = QueryCache(ttl=60, clock=ticker)
    cache.put("k", 1)

    ticker.now = 59.9
    assert cache.get("k") == 1
    ticker.now = 60.0
    assert cache.get("k") is None
    assert (cache.hits, cache.misses, len(cache)) == (1, 1, 0)


def test_an_entry_is_not_served_past_its_fresh_until() -> None:
    cache: QueryCache[str, int] = QueryCache(ttl=60, clock=Ticker())
    cache.put("k", 1, fresh_until=NOW + timedelta(seconds=10))

    assert cache.get("k", now=NOW + timedelta(seconds=9)) == 1
    assert cache.get("k", now=NOW + timedelta(seconds=10)) is None


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: QueryCache[str, int] = QueryCache(ttl=60, max_entries=2, clock=Ticker())
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)

    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_a_ttl_of_zero_turns_the_cache_off() -> None:
    cache: QueryCache[str, int] = QueryCache(ttl=0)
    cache.put("k", 1)

    assert not cache.enabled and cache.get("k") is None and len(cache) == 0


def test_clear_drops_everything() -> None:
    cache: QueryCache[str, int] = QueryCache()
    cache.put("k", 1)
    cache.clear()

    assert cache.get("k") is None


def test_a_size_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        QueryCache(max_entries=0)


@pytest.mark.parametrize(
    ("revisions", "memories", "serve", "store"),
    [(10, 10, True, True), (11, 10, True, False), (10, 11, False, True)],
)
def test_the_projection_positions_decide_whether_the_cache_may_serve_or_store(
    revisions: int, memories: int, serve: bool, store: bool
) -> None:
    snapshot = RevisionSnapshot.at(7, revisions, memories)

    assert (snapshot.may_serve, snapshot.may_store) == (serve, store)


# -- MemorySearch over fake reads --------------------------------------------------------------


def row(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "memory_id": uuid4(),
        "user_id": "alice",
        "memory_key": f"k_{uuid4().hex[:6]}",
        "content": content,
        "category": "preference",
        "scope_type": "global",
        "workspace_type": None,
        "source_type": "explicit",
        "status": "active",
        "revision": 2,
        "created_at": NOW - timedelta(days=1),
        "updated_at": NOW - timedelta(days=1),
        "last_confirmed_at": None,
        "review_after": None,
        "expires_at": None,
        "position": 1,
    } | fields


class FakeReads:
    """Reads with rows in memory; counts the row queries."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.queries = 0

    def retrievable_memories(
        self, user_id: str, scopes: Sequence[Scope], *, now: datetime, limit: int
    ) -> list[dict[str, Any]]:
        self.queries += 1
        return [r for r in self.rows if r["expires_at"] is None or r["expires_at"] > now][:limit]

    def next_shadow_expiry(
        self, user_id: str, scopes: Sequence[Scope], now: datetime
    ) -> datetime | None:
        """When the first visible workspace memory expires (it may hide a global one)."""
        workspaces = {s.workspace_type for s in scopes if s.scope_type == "workspace"}
        times = [
            r["expires_at"]
            for r in self.rows
            if r["scope_type"] == "workspace"
            and r["workspace_type"] in workspaces
            and r["expires_at"] is not None
            and r["expires_at"] > now
        ]
        return min(times, default=None)


@pytest.fixture
def snapshot(monkeypatch: pytest.MonkeyPatch) -> list[RevisionSnapshot]:
    """The revision read_revision answers (the last of the list)."""
    answers = [RevisionSnapshot.at(1, 5, 5)]
    monkeypatch.setattr(query_cache, "read_revision", lambda reads, user_id: answers[-1])
    return answers


def searcher(reads: FakeReads, cache: QueryCache[SearchKey, Found] | None) -> Any:
    def rows(
        reads: FakeReads,
        user_id: str,
        scopes: Sequence[Scope],
        query: Query,
        *,
        now: datetime,
        **_: Any,
    ) -> list[dict[str, Any]]:
        return reads.retrievable_memories(user_id, scopes, now=now, limit=1000)

    return partial(MemorySearch(cache, rows=rows), reads)  # type: ignore[arg-type]


def ids(found: Found) -> list[UUID]:
    return [i.row.memory_id for i in found.result.items]


def test_without_a_cache_every_search_reads_rows(snapshot: list[RevisionSnapshot]) -> None:
    reads = FakeReads([row("I prefer examples first")])
    search = searcher(reads, None)

    first = search("alice", "learning", "examples", now=NOW)
    search("alice", "learning", "examples", now=NOW)

    assert reads.queries == 2 and not first.cached and len(ids(first)) == 1
    assert first.revisions == {reads.rows[0]["memory_id"]: 2}


def test_a_repeated_search_is_served_from_the_cache(snapshot: list[RevisionSnapshot]) -> None:
    reads = FakeReads([row("I prefer examples first")])
    search = searcher(reads, QueryCache())

    first = search("alice", "learning", "examples", now=NOW)
    second = search("alice", "learning", "Examples ", now=NOW)

    assert reads.queries == 1 and second.cached and ids(second) == ids(first)
    assert second.revisions == first.revisions


def test_a_new_revision_misses(snapshot: list[RevisionSnapshot]) -> None:
    reads = FakeReads([row("I prefer examples first")])
    search = searcher(reads, QueryCache())
    search("alice", "learning", "examples", now=NOW)

    reads.rows.clear()  # e.g. the memory was forgotten ...
    snapshot.append(RevisionSnapshot.at(2, 6, 6))  # ... which advanced the revision

    assert ids(search("alice", "learning", "examples", now=NOW)) == []


def test_another_workspace_or_user_never_shares_an_entry(snapshot: list[RevisionSnapshot]) -> None:
    reads = FakeReads([row("I prefer examples first")])
    search = searcher(reads, QueryCache())
    search("alice", "learning", "examples", now=NOW)

    assert not search("alice", "research", "examples", now=NOW).cached
    assert not search("bob", "learning", "examples", now=NOW).cached
    assert reads.queries == 3


def test_nothing_is_served_while_the_revisions_lag_the_memories(
    snapshot: list[RevisionSnapshot],
) -> None:
    reads = FakeReads([row("I prefer examples first")])
    search = searcher(reads, QueryCache())
    search("alice", "learning", "examples", now=NOW)

    snapshot.append(RevisionSnapshot.at(1, 5, 6))  # the memories table already saw a newer event

    assert not search("alice", "learning", "examples", now=NOW).cached


def test_nothing_is_stored_while_the_memories_lag_the_revisions(
    snapshot: list[RevisionSnapshot],
) -> None:
    reads = FakeReads([row("I prefer examples first")])
    cache: QueryCache[SearchKey, Found] = QueryCache()
    snapshot.append(RevisionSnapshot.at(2, 6, 5))

    searcher(reads, cache)("alice", "learning", "examples", now=NOW)

    assert len(cache) == 0


def test_an_entry_ends_when_one_of_its_memories_expires(snapshot: list[RevisionSnapshot]) -> None:
    soon = NOW + timedelta(minutes=5)
    reads = FakeReads([row("I prefer examples first", expires_at=soon)])
    search = searcher(reads, QueryCache(ttl=3600))
    assert ids(search("alice", "learning", "examples", now=NOW))

    later = search("alice", "learning", "examples", now=soon)

    assert not later.cached and ids(later) == []


def test_an_entry_ends_when_one_of_its_memories_falls_due_for_review(
    snapshot: list[RevisionSnapshot],
) -> None:
    due = NOW + timedelta(minutes=5)
    reads = FakeReads([row("I prefer examples first", review_after=due)])
    search = searcher(reads, QueryCache(ttl=3600))
    search("alice", "learning", "examples", now=NOW)

    assert search("alice", "learning", "examples", now=NOW + timedelta(minutes=4)).cached
    assert not search("alice", "learning", "examples", now=due).cached


def test_a_disabled_cache_is_not_even_consulted(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: Any) -> RevisionSnapshot:
        raise AssertionError("no revision read without a cache")

    monkeypatch.setattr(query_cache, "read_revision", fail)
    reads = FakeReads([row("I prefer examples first")])

    assert ids(searcher(reads, QueryCache(ttl=0))("alice", "learning", "examples", now=NOW))


def test_the_retrieval_version_is_the_rankers() -> None:
    assert MemorySearch(None).version() == f"{WEIGHTS.version}/lexical"
    assert isinstance(Found(SearchResult([], 0)).revisions, dict)
