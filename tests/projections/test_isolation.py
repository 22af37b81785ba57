"""One projection that cannot make progress holds back only itself.

With a view's table locked by another session (ACCESS EXCLUSIVE, as a DDL or a `LOCK TABLE`
left open takes it), the other projections apply the new events and a read that needs only
them is answered; the locked view catches up once the lock is gone, each event applied once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.ledger.positions import pack
from domain.model.values import Scope
from projections.reads import Reads
from projections.rebuild import rebuild
from projections.registry import all_projections
from projections.views.active_memories import ActiveMemories
from projections.views.search_terms import SearchTerms
from projections.views.tombstones import Tombstones
from projections.worker import ProjectionWorker


@contextmanager
def locked(database_url: str, schema: str, table: str) -> Iterator[None]:
    """The table locked ACCESS EXCLUSIVE by another session for the block."""
    with psycopg.connect(database_url) as other:
        other.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, table))
        )
        try:
            yield
        finally:
            other.rollback()


def create(ledger: MemoryLedger, key: str) -> Any:
    outcome = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key=key, content=f"fact {key}", category="fact"
    )
    assert outcome.memory is not None
    return outcome


def packed(worker: ProjectionWorker) -> dict[str, int]:
    """Each projection's position as a ledger position: every event here is alice's, in
    her partition."""
    return {name: pack(part, local) for (name, part), local in worker.positions().items()}


def until_may_run(worker: ProjectionWorker, name: str) -> None:
    while not worker._aside.may_run(name):  # its retry wait (0.1 s the first time)
        time.sleep(0.02)


def test_a_locked_view_holds_back_only_itself_and_catches_up_exactly_once(
    ledger: MemoryLedger,
    make_worker: Callable[..., ProjectionWorker],
    database_url: str,
    pg_schema: str,
) -> None:
    worker = make_worker(lock_timeout=0.2)
    first = create(ledger, "before")
    worker.catch_up()
    with locked(database_url, pg_schema, "memledger_search_terms"):
        written = create(ledger, "during")
        worker.catch_up()
        positions = packed(worker)
        others = {n: p for n, p in positions.items() if n != SearchTerms.name}
        assert set(others.values()) == {written.position}, positions
        assert positions[SearchTerms.name] == first.position
        assert SearchTerms.name in worker._aside.held
        # A read of the memory (active_memories, tombstones) is answered meanwhile.
        names = [ActiveMemories.name, Tombstones.name]
        assert worker.wait(written.position, timeout=0.0, names=names)
        assert not worker.wait(written.position, timeout=0.0, names=[SearchTerms.name])
        row = Reads(worker.pool, pg_schema, worker.ledger.partition).memory(
            "alice", written.memory.memory_id
        )
        assert row is not None and row.content == "fact during"
        # Retried while still locked: held back again, the others go on with new events.
        until_may_run(worker, SearchTerms.name)
        later = create(ledger, "later")
        worker.catch_up()
        assert packed(worker)[ActiveMemories.name] == later.position
        assert packed(worker)[SearchTerms.name] == first.position
    until_may_run(worker, SearchTerms.name)
    worker.catch_up()
    assert set(packed(worker).values()) == {later.position}
    assert SearchTerms.name not in worker._aside.held
    with psycopg.connect(database_url) as conn:
        terms = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(pg_schema, "memledger_search_terms")
            )
        ).fetchone()
    assert terms == (3,)  # each memory once
    assert rebuild(ledger, worker.pool, pg_schema, all_projections(), processes=1).identical


def test_a_get_is_answered_while_the_search_index_is_locked(
    client: TestClient,
    services: Any,
    auth: Callable[..., dict[str, str]],
    database_url: str,
    pg_schema: str,
) -> None:
    services.worker.lock_timeout = 0.2
    body = {"memory_key": "k", "content": "例子先于定义", "category": "preference"}
    with locked(database_url, pg_schema, "memledger_search_terms"):
        created = client.post(
            "/me/core-memories", json=body | {"scope_type": "global"}, headers=auth()
        )
        assert created.status_code == 201
        memory_id = created.json()["memory_id"]
        got = client.get(f"/me/core-memories/{memory_id}", headers=auth())
        assert got.status_code == 200, got.text
        listed = client.get("/me/core-memories", headers=auth())
        assert [m["memory_id"] for m in listed.json()["items"]] == [memory_id]
    searched = client.post(
        "/tools/search_core_memories",
        json={"query": "例子"},
        headers=auth(workspace="learning"),
    )
    assert searched.status_code == 200  # once the index is free, the search waits and finds it
    assert [m["memory_id"] for m in searched.json()["items"]] == [memory_id]
