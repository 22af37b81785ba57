"""The save bypass writes what the library's `Application.save` writes, side-table rows included."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from api.bootstrap import postgres_env
from api.settings import Settings
from domain.ledger.keyring import MasterKeyring
from domain.ledger.ledger import MemoryLedger
from domain.ledger.persistence import recorder
from domain.ledger.positions import local_of, partition_of
from domain.model.memory import Memory
from domain.model.values import Scope


def new_memory(ledger: MemoryLedger, key: str) -> tuple[Memory, dict[str, Any]]:
    memory, new_key, claim = ledger.memories.build(
        "alice", Scope.global_(), key, "I prefer examples first", "preference",
        "explicit", "user_api", None, None, None,
    )  # fmt: skip
    # The store names each aggregate's and each user's partition for the recorder, as here.
    partitions = {memory.id: ledger.partition("alice")}
    users = {"alice": ledger.partition("alice")}
    return memory, {
        "new_keys": [new_key],
        "claims": [claim],
        "partitions": partitions,
        "user_partitions": users,
    }


def stored(ledger: MemoryLedger, position: int) -> Any:
    (note,) = ledger.recorder.read_partition(partition_of(position), local_of(position) - 1, 1)
    assert note.id == position
    return note


def test_the_bypass_and_the_librarys_save_write_the_same_events_and_rows(
    ledger: MemoryLedger,
) -> None:
    bypassed, changes = new_memory(ledger, "style")
    by_bypass = recorder.record(ledger, [bypassed], changes)
    ledger.keys.unstage(changes["new_keys"])
    saved, changes = new_memory(ledger, "tone")
    recordings = ledger.save(saved, **changes)  # the library's path, same recorder hook
    ledger.keys.unstage(changes["new_keys"])
    by_library = recordings[-1].notification.id

    assert by_bypass is not None and partition_of(by_library) == partition_of(by_bypass)
    assert local_of(by_library) == local_of(by_bypass) + 1  # the next in alice's partition
    one, other = stored(ledger, by_bypass), stored(ledger, by_library)
    assert (one.topic, one.originator_version) == (other.topic, other.originator_version)
    first, second = ledger.mapper.to_domain_event(one), ledger.mapper.to_domain_event(other)
    ignored = {"originator_id", "timestamp", "memory_key", "content_hash"}  # per memory
    assert {k: v for k, v in vars(first).items() if k not in ignored} == {
        k: v for k, v in vars(second).items() if k not in ignored
    }
    # Both claims were written in their save's transaction: each key is taken now.
    assert ledger.store.find_by_key("alice", Scope.global_(), "style") is not None
    assert ledger.store.find_by_key("alice", Scope.global_(), "tone") is not None


def test_with_an_aggregate_cache_the_librarys_save_runs_and_keeps_the_cache(
    ledger: MemoryLedger,
    database_url: str,
    pg_schema: str,
    master_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = postgres_env(Settings(database_url=database_url, db_schema=pg_schema), database_url)
    cached = MemoryLedger(
        {**env, "AGGREGATE_CACHE_MAXSIZE": "100"}, MasterKeyring.from_base64([master_key])
    )
    library_saves: list[int] = []
    original = MemoryLedger.save

    def spy(self: MemoryLedger, *aggregates: Any, **changes: Any) -> Any:
        library_saves.append(len(aggregates))
        return original(self, *aggregates, **changes)

    monkeypatch.setattr(MemoryLedger, "save", spy)
    try:
        assert cached.repository.cache is not None
        outcome = cached.create_memory(
            "alice", scope=Scope.global_(), memory_key="k", content="fact", category="fact"
        )
        assert outcome.memory is not None
        memory_id = outcome.memory.memory_id
        cached.update_memory("alice", memory_id, expected_revision=1, content="fact two")
        assert cached.get_memory("alice", memory_id).content == "fact two"  # from its cache
    finally:
        cached.close()
    assert library_saves == [1, 1]
    assert ledger.get_memory("alice", memory_id).content == "fact two"


def test_a_violation_reported_by_a_citus_worker_is_recognised_by_its_constraint() -> None:
    """On Citus the coordinator passes on the worker's message, not the constraint's name, and
    the name is the shard's (`_<shard id>` appended): a lost claim and a stale key are still
    told apart (persistence/violations.py's `_constraint`)."""

    class Diag:
        constraint_name = None

        def __init__(self, message: str) -> None:
            self.message_primary = message

    def error(message: str) -> IntegrityError:
        cause = Exception()
        cause.diag = Diag(message)  # type: ignore[attr-defined]
        raised = IntegrityError(message)
        raised.__cause__ = cause
        return raised

    lost = error('duplicate key value violates unique constraint "memledger_key_claims_pk_103074"')
    stale = error(
        'insert or update on table "memledger_key_claims_103090" violates foreign key'
        ' constraint "memledger_claim_key_fkey_103090"'
    )
    assert recorder.lost_claim(lost) and not recorder.stale_key(lost)
    assert recorder.stale_key(stale) and not recorder.lost_claim(stale)
