"""Erase and forget racing the user's own writers, real threads on PostgreSQL (issue 13: 2, 3).

Nothing of an erased user, or of a forgotten memory, may stay readable: not through an endpoint,
a projection or the search index, and not through a candidate that committed after the
tombstone. Writes that race an erase either fail cleanly (503, `LedgerUnavailable`) or commit
after it, as a fresh start that a later erase takes too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from api.services import Services
from domain.errors import LedgerUnavailable, MemoryForgotten, NotFound
from domain.ledger.ledger import MemoryLedger
from domain.model.events import REDACTED
from domain.model.values import Scope
from tests import polling

Auth = Callable[..., dict[str, str]]
WRITERS = 8
MARK = "zq7mark"


@pytest.fixture
def ledger(make_ledger: Callable[..., MemoryLedger]) -> MemoryLedger:
    """The API's ledger, with a connection for every racing writer."""
    return make_ledger(pool_size=WRITERS + 4)


def schema_text(database_url: str, schema: str) -> str:
    """Every row of every table of the test's schema, as text (events are sealed bytes)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        parts = []
        for (name,) in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} t").format(
                sql.Identifier(schema), sql.Identifier(name)
            )
            parts.extend(row[0] for row in conn.execute(query))
    return "\n".join(parts)


def caught_up(services: Services) -> None:
    assert services.worker is not None
    assert polling.caught_up(services.worker, services.ledger, 120)


# -- erase-user racing 8 writers ---------------------------------------------------------------


def run_writers(
    ledger: MemoryLedger, stop: threading.Event, user: str = "alice"
) -> tuple[list[threading.Thread], list[tuple[str, UUID, int]], list[Exception]]:
    """WRITERS threads creating memories until `stop`: (content, id, position) of each."""
    created: list[tuple[str, UUID, int]] = []
    errors: list[Exception] = []

    def write(i: int) -> None:
        n = 0
        while not stop.is_set():
            content = f"{MARK}-{i}-{n}-end"  # "-end": no content is a prefix of another
            try:
                outcome = ledger.create_memory(
                    user,
                    scope=Scope.global_(),
                    memory_key=f"k{i}_{n}",
                    content=content,
                    category="fact",
                )
            except Exception as error:
                errors.append(error)
            else:
                assert outcome.memory is not None and outcome.position is not None
                created.append((content, outcome.memory.memory_id, outcome.position))
            n += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    return threads, created, errors


def until(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_erase_racing_eight_writers_leaves_nothing_of_what_came_before(
    client: TestClient,
    auth: Auth,
    services: Services,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    ledger = services.ledger
    bob = ledger.create_memory(
        "bob", scope=Scope.global_(), memory_key="b", content="bob stays", category="fact"
    )
    stop = threading.Event()
    threads, created, errors = run_writers(ledger, stop)
    try:
        until(lambda: len(created) >= 3 * WRITERS)
        # The CLI erases from a process of its own: another ledger, with caches of its own.
        erased = make_ledger().erase_user("alice")
        until(lambda: len(created) >= 3 * WRITERS + 30 or (bool(errors) and len(created) > 40))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert erased.position is not None
    # Writes racing the erase wait for it; they either fail cleanly or commit after it.
    assert all(isinstance(e, LedgerUnavailable) for e in errors), errors
    before = [(c, m) for c, m, position in created if position < erased.position]
    after = [(c, m) for c, m, position in created if position > erased.position]
    assert len(before) >= 3 * WRITERS and before + after == [(c, m) for c, m, _ in created]

    fresh = make_ledger()  # no cached key: reads what the database holds
    for _, memory_id in before:
        with pytest.raises(MemoryForgotten):  # a tombstone, not just a missing key
            fresh.get_memory("alice", memory_id)
        assert fresh.keys.get(memory_id) is None
    for content, memory_id in after:  # a fresh start: live, readable
        assert fresh.get_memory("alice", memory_id).content == content

    caught_up(services)
    gone = {content for content, _ in before}
    stored = schema_text(database_url, pg_schema)
    assert not [c for c in gone if c in stored]  # no projection, index or side table has it
    served = [
        client.get("/me/core-memories", params={"limit": 100}, headers=auth()).text,
        client.get("/me/memories", headers=auth()).text,
        client.post(
            "/tools/search_core_memories",
            json={"query": MARK, "limit": 20},
            headers=auth(workspace="learning"),
        ).text,
        client.post("/tools/list_core_memories", json={}, headers=auth(workspace="learning")).text,
    ]
    for _, memory_id in before[:5]:
        for path in (f"/me/core-memories/{memory_id}", f"/me/core-memories/{memory_id}/versions"):
            answer = client.get(path, headers=auth())
            assert answer.status_code in (404, 410), answer.text
    assert not [c for c in gone if any(c in text for text in served)]
    assert fresh.get_memory("bob", bob.memory.memory_id).content == "bob stays"  # type: ignore[union-attr]

    # A second erase takes the fresh start too, and leaves no live memory, key or claim.
    make_ledger().erase_user("alice")
    for _, memory_id in before + after:
        with pytest.raises(MemoryForgotten):
            fresh.get_memory("alice", memory_id)
    assert fresh.memory_ids("alice") == []


def test_a_second_erase_finds_memories_that_lost_their_key_without_a_tombstone(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger], database_url: str
) -> None:
    """A ledger damaged by the old erase (keys deleted by user, no tombstone) is repaired."""
    kept = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="lost key", category="fact"
    )
    assert kept.memory is not None
    table = f'"{ledger.factory.datastore.schema}".memledger_data_keys'  # type: ignore[attr-defined]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {table} WHERE key_id = %s", (kept.memory.memory_id,))

    make_ledger().erase_user("alice")

    with pytest.raises(MemoryForgotten):
        make_ledger().get_memory("alice", kept.memory.memory_id)


def test_erasing_a_user_the_ledger_never_saw_is_not_found(ledger: MemoryLedger) -> None:
    with pytest.raises(NotFound):
        ledger.erase_user("nobody")


# -- candidates racing the forget of their target ----------------------------------------------


def test_replacement_candidates_racing_the_owners_delete_end_expired_and_redacted(
    client: TestClient,
    auth: Auth,
    services: Services,
    make_ledger: Callable[..., MemoryLedger],
    database_url: str,
    pg_schema: str,
) -> None:
    agent = auth(workspace="learning")
    body = {"memory_key": "style", "category": "preference", "scope_type": "global"}
    forgotten: list[str] = []
    answers: list[Any] = []
    for round_ in range(3):
        first = client.post(
            "/me/core-memories", json={**body, "content": f"original {round_}"}, headers=auth()
        )
        assert first.status_code == 201, first.text
        target = first.json()["memory_id"]
        stop = threading.Event()
        started = threading.Barrier(5)

        def save(
            i: int, round_: int = round_, stop: threading.Event = stop, started: Any = started
        ) -> None:
            started.wait()
            n = 0
            while not stop.is_set() and n < 40:
                content = f"{MARK}-{round_}-{i}-{n}"
                saved = client.post(
                    "/tools/save_core_memory", json={**body, "content": content}, headers=agent
                )
                answers.append(saved)
                n += 1

        threads = [threading.Thread(target=save, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        started.wait()
        until(lambda n=8 * (round_ + 1): len(answers) >= n)
        deleted = client.delete(f"/me/core-memories/{target}", headers=auth())
        assert deleted.status_code == 204, deleted.text
        forgotten.append(target)
        time.sleep(0.2)
        stop.set()
        for thread in threads:
            thread.join()
        # What the savers made after the forget is about a new memory: forget it too.
        live = client.get("/me/core-memories", headers=auth()).json()["items"]
        for memory in live:
            assert client.delete(f"/me/core-memories/{memory['memory_id']}", headers=auth())
    # A save that met its target forgotten between create and propose creates (never 409/410).
    assert {a.status_code for a in answers} == {200}, {a.text for a in answers}

    caught_up(services)
    fresh = make_ledger()
    stored = schema_text(database_url, pg_schema)
    about = []
    for status in ("pending", "accepted", "rejected", "expired"):
        rows = client.get("/me/memory-candidates", params={"status": status}, headers=auth())
        assert rows.status_code == 200, rows.text
        for row in rows.json()["items"]:
            if row.get("target_memory_id") in forgotten:
                about.append(row)
                assert status == "expired", row
                assert row["proposed_content"] == row["proposed_key"] == REDACTED, row
                candidate = fresh.get_candidate("alice", UUID(row["candidate_id"]))
                assert candidate.status == "expired"
                assert fresh.keys.get(candidate.candidate_id) is None
    assert about, "the savers made no candidate about the memories forgotten"
    assert MARK not in stored  # every candidate was about a memory forgotten since


def test_a_candidate_about_a_memory_forgotten_after_it_was_loaded_is_refused(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    """The proposal checked its target live; the forget committed before the proposal's save."""
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="old", category="fact"
    ).memory
    assert memory is not None
    other = make_ledger()
    real_save = ledger.store.save
    forgot: list[bool] = []

    def save_after_a_forget(*aggregates: Any, **changes: Any) -> Any:
        if not forgot:
            forgot.append(True)
            other.forget_memory("alice", memory.memory_id)
        return real_save(*aggregates, **changes)

    ledger.store.save = save_after_a_forget  # type: ignore[method-assign]
    with pytest.raises(MemoryForgotten):
        ledger.propose_candidate(
            "alice",
            operation="replace",
            scope=Scope.global_(),
            memory_key="k",
            content="new",
            category="fact",
            target_memory_id=memory.memory_id,
        )
    assert forgot
    about = other.keys.candidates_about(other.partition("alice"), memory.memory_id)
    assert about == []  # no candidate key was stored


def test_forget_racing_eight_writers_leaves_no_content_and_no_pending_candidate(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    """Four threads correct the memory, four propose replacements; the owner forgets it."""
    created = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="k", content="v0", category="fact"
    )
    assert created.memory is not None
    memory_id = created.memory.memory_id
    stop = threading.Event()
    errors: list[Exception] = []
    proposed: list[UUID] = []

    def correct(i: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                current = ledger.get_memory("alice", memory_id)
                ledger.update_memory(
                    "alice", memory_id, expected_revision=current.revision, content=f"{MARK}u{i}{n}"
                )
            except MemoryForgotten:
                return
            except Exception as error:  # RevisionConflict: another corrector won
                errors.append(error)
            n += 1

    def propose(i: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                outcome = ledger.propose_candidate(
                    "alice",
                    operation="replace",
                    scope=Scope.global_(),
                    memory_key="k",
                    content=f"{MARK}p{i}{n}",
                    category="fact",
                    target_memory_id=memory_id,
                )
            except MemoryForgotten:
                return
            assert outcome.candidate is not None
            proposed.append(outcome.candidate.candidate_id)
            n += 1

    threads = [threading.Thread(target=correct, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=propose, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        until(lambda: len(proposed) >= 12)
        make_ledger().forget_memory("alice", memory_id)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert {type(e).__name__ for e in errors} <= {"RevisionConflict"}
    fresh = make_ledger()
    with pytest.raises(MemoryForgotten):
        fresh.get_memory("alice", memory_id)
    assert fresh.keys.get(memory_id) is None
    for candidate_id in proposed:
        candidate = fresh.get_candidate("alice", candidate_id)
        assert candidate.status == "expired" and candidate.proposed_content == REDACTED
        assert fresh.keys.get(candidate_id) is None
