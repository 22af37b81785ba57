"""A destroyed key is dead in every process (issue 22: 1, 2), on a real PostgreSQL.

Two ledgers on one schema stand for two processes (the server and `memledger erase-user`, or two
replicas). "Stale" is a ledger that keeps keys cached for an hour and hears no revocation note:
what it holds in memory must never let it write, hash or show anything under a key another
process destroyed. The listener tests check that a following ledger drops such keys at once.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from domain.errors import KeyExists
from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope
from replay import replay_events
from tests.polling import until

Make = Callable[..., MemoryLedger]
GLOBAL = Scope.global_()


def create(ledger: MemoryLedger, key: str, content: str, user: str = "alice") -> UUID:
    outcome = ledger.create_memory(
        user, scope=GLOBAL, memory_key=key, content=content, category="fact"
    )
    assert outcome.memory is not None
    return outcome.memory.memory_id


def claims_of(database_url: str, schema: str, user: str) -> int:
    table = sql.SQL("{}.memledger_key_claims").format(sql.Identifier(schema))
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE user_id = %s").format(table), (user,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def stale(make_ledger: Make) -> MemoryLedger:
    """A process whose cache outlives any erase: an hour's TTL and no revocation listener."""
    return make_ledger(key_cache_ttl=3600.0)


def test_a_write_hashed_under_an_erased_users_key_is_retried_under_the_live_key(
    stale: MemoryLedger, make_ledger: Make, database_url: str, pg_schema: str
) -> None:
    create(stale, "seed", "caches alice's own key here")
    other = make_ledger()
    other.erase_user("alice")  # the user's key row is deleted; `stale` still holds it

    first = create(stale, "dup_key", "I am vegetarian")  # retried under a new key
    with pytest.raises(KeyExists) as taken:
        create(other, "dup_key", "I eat steak every day")
    assert taken.value.memory_id == first
    with pytest.raises(KeyExists):
        create(stale, "dup_key", "I eat steak every day")
    assert other.memory_ids("alice") == [first]
    assert claims_of(database_url, pg_schema, "alice") == 1


def test_a_stale_process_loses_the_key_to_a_claim_made_under_the_new_users_key(
    stale: MemoryLedger, make_ledger: Make
) -> None:
    create(stale, "seed", "caches alice's own key here")
    other = make_ledger()
    other.erase_user("alice")
    made = create(other, "dup_key", "I am vegetarian")  # under alice's new key

    with pytest.raises(KeyExists) as taken:
        create(stale, "dup_key", "I eat steak every day")
    assert taken.value.memory_id == made
    assert stale.store.find_by_key("alice", GLOBAL, "dup_key") is not None  # under the new key


def test_proposals_after_an_erase_are_recognised_by_every_process(
    stale: MemoryLedger, make_ledger: Make
) -> None:
    def propose(ledger: MemoryLedger) -> str:
        return ledger.propose_candidate(
            "alice",
            operation="create",
            scope=GLOBAL,
            memory_key="lunch",
            content="likes noodles for lunch",
            category="preference",
        ).status

    assert propose(stale) == "candidate_created"
    other = make_ledger()
    other.erase_user("alice")
    assert propose(stale) == "candidate_created"  # a fresh start, fingerprinted under the new key
    assert propose(other) == "duplicate"
    assert propose(stale) == "duplicate"


def test_replay_from_another_process_shows_no_forgotten_content(
    stale: MemoryLedger, make_ledger: Make
) -> None:
    memory_id = create(stale, "diet", "I am vegetarian")
    assert any(not e["redacted"] for e in replay_events(stale, user_id="alice"))  # cached
    make_ledger().forget_memory("alice", memory_id)

    events = list(replay_events(stale, user_id="alice"))
    created = next(e for e in events if e["event_type"] == "memory.created")
    assert created["redacted"] is True
    assert "vegetarian" not in repr(events)


def test_replay_redacts_a_tombstoned_memory_whose_key_row_came_back(
    stale: MemoryLedger, make_ledger: Make, database_url: str, pg_schema: str
) -> None:
    memory_id = create(stale, "diet", "I am vegetarian")
    keys = sql.SQL("{}.memledger_data_keys").format(sql.Identifier(pg_schema))
    with psycopg.connect(database_url) as conn:
        backup = conn.execute(
            sql.SQL("SELECT * FROM {} WHERE key_id = %s").format(keys), (memory_id,)
        ).fetchall()
    stale.forget_memory("alice", memory_id)
    with psycopg.connect(database_url) as conn:  # yesterday's key table, restored
        placeholders = sql.SQL(", ").join([sql.Placeholder()] * len(backup[0]))
        conn.execute(sql.SQL("INSERT INTO {} VALUES ({})").format(keys, placeholders), backup[0])

    events = list(replay_events(make_ledger(), user_id="alice"))
    created = next(e for e in events if e["event_type"] == "memory.created")
    assert created["redacted"] is True
    assert "vegetarian" not in repr(events)


# -- the revocation listener ---------------------------------------------------------------------


def held_without_asking(ledger: MemoryLedger, key_id: UUID, asked: list[set[UUID]]) -> bool:
    """Does the cache answer for this key without a query (alive or gone)?"""
    asked.clear()
    ledger.keys.get(key_id)
    return not asked


def test_a_following_process_drops_a_key_destroyed_elsewhere_at_once(
    make_ledger: Make, asked: list[set[UUID]]
) -> None:
    follower = make_ledger(key_cache_ttl=3600.0)
    assert follower.follow_revocations()
    memory_id = create(follower, "diet", "I am vegetarian")
    assert follower.keys.get(memory_id) is not None
    assert held_without_asking(follower, memory_id, asked)  # cached

    make_ledger().forget_memory("alice", memory_id)
    # The note arrives within milliseconds; then the key is gone without asking the table.
    assert until(lambda: follower.keys.get(memory_id) is None)
    assert held_without_asking(follower, memory_id, asked)


def test_an_erase_elsewhere_drops_the_users_own_key_too(
    make_ledger: Make, asked: list[set[UUID]]
) -> None:
    follower = make_ledger(key_cache_ttl=3600.0)
    assert follower.follow_revocations()
    create(follower, "seed", "caches alice's own key here")
    own = follower.keys.get(user_key_id("alice"))
    assert own is not None

    make_ledger().erase_user("alice")
    assert until(lambda: follower.keys.get(user_key_id("alice")) is None)


def listener_pids(database_url: str, channel: str) -> list[int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE query = %s", (f'LISTEN "{channel}"',)
        ).fetchall()
    return [row[0] for row in rows]


def following_with_a_cached_key(
    make_ledger: Make, asked: list[set[UUID]]
) -> tuple[MemoryLedger, UUID]:
    """A ledger following revocations, a memory's key in its cache (answered without asking)."""
    follower = make_ledger(key_cache_ttl=3600.0)
    assert follower.follow_revocations()
    memory_id = create(follower, "diet", "I am vegetarian")
    follower.keys.get(memory_id)
    assert held_without_asking(follower, memory_id, asked)
    return follower, memory_id


def test_while_the_listener_is_down_no_cached_key_is_trusted(
    make_ledger: Make, database_url: str, asked: list[set[UUID]]
) -> None:
    follower, memory_id = following_with_a_cached_key(make_ledger, asked)

    channel = follower.recorder.revocation_channel  # type: ignore[attr-defined]
    (pid,) = listener_pids(database_url, channel)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # Lost: every look-up reads the table until the listener listens again.
    assert until(lambda: not held_without_asking(follower, memory_id, asked))
    assert until(lambda: len(listener_pids(database_url, channel)) == 1)
    follower.keys.get(memory_id)
    assert until(lambda: held_without_asking(follower, memory_id, asked))


def test_a_stopping_listener_wakes_itself_and_its_note_revokes_nothing(
    make_ledger: Make, database_url: str, asked: list[set[UUID]]
) -> None:
    follower, memory_id = following_with_a_cached_key(make_ledger, asked)

    channel = follower.recorder.revocation_channel  # type: ignore[attr-defined]
    (follower_pid,) = listener_pids(database_url, channel)
    other = make_ledger()
    assert other.follow_revocations()
    other.close()  # its listener is woken by an empty note, which every listener hears
    assert until(lambda: listener_pids(database_url, channel) == [follower_pid])
    assert held_without_asking(follower, memory_id, asked)  # the note dropped nothing
