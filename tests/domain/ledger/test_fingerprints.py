"""Fingerprints of proposals (issue 14): never in the log, gone 30 days after the decision, and
those about a memory keyed with that memory's key, so forgetting it makes them uncheckable."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from domain.ledger.ledger import MemoryLedger
from domain.model.candidate import MemoryCandidate
from domain.model.values import Scope
from tests.conftest import Clock


def prints(database_url: str, schema: str) -> dict[UUID, tuple[str, str]]:
    """candidate id -> (fingerprint, state) of every row of the fingerprint table."""
    table = sql.SQL("{}.memledger_candidate_fingerprints").format(sql.Identifier(schema))
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT candidate_id, fingerprint, state FROM {}").format(table)
        ).fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


def propose(ledger: MemoryLedger, content: str, **about: Any) -> Any:
    operation = "replace" if about else "create"
    return ledger.propose_candidate(
        "alice",
        operation=operation,
        scope=Scope.global_(),
        memory_key="style",
        content=content,
        category="preference",
        **about,
    )


def test_a_rejection_leaves_no_fingerprint_in_the_log(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    candidate = propose(ledger, "likes long proofs").candidate
    ledger.reject_candidate("alice", candidate.candidate_id)

    (fingerprint, state) = prints(database_url, pg_schema)[candidate.candidate_id]
    assert state == "rejected"
    events = sql.SQL("{}.memledger_events").format(sql.Identifier(pg_schema))
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(sql.SQL("SELECT state FROM {}").format(events)).fetchall()
    states = [bytes(row[0]) for row in rows]
    assert not [s for s in states if fingerprint.encode() in s or b'"fingerprint"' in s]
    assert propose(ledger, "likes long proofs").status == "previously_rejected"


def test_decided_fingerprints_go_30_days_after_the_decision(
    ledger: MemoryLedger, clock: Clock, database_url: str, pg_schema: str
) -> None:
    rejected = propose(ledger, "likes long proofs").candidate
    ledger.reject_candidate("alice", rejected.candidate_id)
    clock.advance(days=29)
    pending = propose(ledger, "likes short proofs").candidate  # pending: never pruned
    assert set(prints(database_url, pg_schema)) == {rejected.candidate_id, pending.candidate_id}
    assert propose(ledger, "likes long proofs").status == "previously_rejected"

    clock.advance(days=2)
    assert ledger.complete_shredding() == 0  # at every start-up, and with each proposal
    assert set(prints(database_url, pg_schema)) == {pending.candidate_id}
    assert propose(ledger, "likes long proofs").status == "candidate_created"  # a fresh start


def test_a_proposal_about_a_memory_is_keyed_with_that_memory_s_key(
    ledger: MemoryLedger, database_url: str, pg_schema: str
) -> None:
    memory = ledger.create_memory(
        "alice", scope=Scope.global_(), memory_key="style", content="proofs", category="preference"
    ).memory
    assert memory is not None
    about = propose(ledger, "likes long proofs", target_memory_id=memory.memory_id).candidate
    alone = propose(ledger, "likes long proofs").candidate  # the same proposal, about nothing
    stored = prints(database_url, pg_schema)
    assert stored[about.candidate_id][0] != stored[alone.candidate_id][0]
    expected = ledger.hashes.proposal(
        "alice", Scope.global_(), "style", "likes long proofs", "preference", memory.memory_id
    )
    assert stored[about.candidate_id][0] == expected.value
    assert expected.key_id == memory.memory_id  # the row names the key it was hashed under

    ledger.forget_memory("alice", memory.memory_id)
    assert about.candidate_id not in prints(database_url, pg_schema)  # its row went too
    assert ledger.keys.get(memory.memory_id) is None  # and the key it was keyed with


def test_a_version_1_rejection_in_the_log_reads_without_its_fingerprint(
    ledger: MemoryLedger,
) -> None:
    candidate = propose(ledger, "likes long proofs").candidate
    ledger.reject_candidate("alice", candidate.candidate_id)
    mapper = ledger.mapper
    stored = mapper.to_stored_event(list(ledger.events.get(candidate.candidate_id))[-1])
    state = json.loads(stored.state)
    assert state.pop("class_version") == 2 and "fingerprint" not in state
    # What version 1 wrote: the fingerprint in clear, no class_version.
    v1 = StoredEvent(
        stored.originator_id,
        stored.originator_version,
        stored.topic,
        json.dumps({**state, "fingerprint": "f" * 64}).encode(),
    )
    event = mapper.to_domain_event(v1)
    assert isinstance(event, MemoryCandidate.Rejected) and not hasattr(event, "fingerprint")
