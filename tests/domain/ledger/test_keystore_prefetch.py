"""`DataKeyStore.prefetch` asks the database only for keys it does not hold already."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID, uuid4

from domain.ledger.keystore import user_key_id
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope


def memories(ledger: MemoryLedger, n: int, prefix: str = "k") -> list[UUID]:
    made = []
    for i in range(n):
        outcome = ledger.create_memory(
            "alice",
            scope=Scope.global_(),
            memory_key=f"{prefix}{i}",
            content=f"note {i}",
            category="fact",
        )
        assert outcome.memory is not None
        made.append(outcome.memory.memory_id)
    return made


def test_cached_keys_are_not_fetched_again(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger], asked: list[set[UUID]]
) -> None:
    ids = memories(ledger, 3)
    ledger.forget_memory("alice", ids[2])  # its key is destroyed: a miss, cached too
    reader = make_ledger()  # a cold cache, like a rebuild's process
    asked.clear()
    reader.keys.prefetch(ids)
    assert asked == [set(ids)]
    reader.keys.prefetch(ids)
    reader.keys.prefetch(ids[:1])
    assert asked == [set(ids)]
    newcomer, unknown = memories(ledger, 1, "new")[0], uuid4()
    asked.clear()
    reader.keys.prefetch([*ids, newcomer, unknown])
    assert asked == [{newcomer, unknown}]
    assert reader.keys.get(ids[0]) is not None and reader.keys.get(newcomer) is not None
    assert reader.keys.get(ids[2]) is None and reader.keys.get(unknown) is None
    assert asked == [{newcomer, unknown}]


def test_expired_keys_are_fetched_again(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger], asked: list[set[UUID]]
) -> None:
    ids = memories(ledger, 2)
    reader = make_ledger(key_cache_ttl=0.0)  # every cached key has expired at once
    asked.clear()
    reader.keys.prefetch(ids)
    reader.keys.prefetch(ids)
    assert asked == [set(ids), set(ids)]
    asked.clear()
    assert reader.keys.get(ids[0]) is not None  # the key just loaded, though expired at once
    assert reader.keys.user_key("alice") == ledger.keys.user_key("alice")
    assert asked == [{ids[0]}, {user_key_id("alice")}]
