"""`DataKeyStore.derived`: what readers make of a key is cached with the key and goes with it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import ClassVar
from uuid import UUID, uuid4

from domain.ledger.keystore import DataKeyStore
from domain.ledger.ledger import MemoryLedger
from domain.model.values import Scope


class Made:
    """Something made of a key (an AES-GCM object, say), counted and watched."""

    made: ClassVar[list[bytes]]

    def __init__(self, key: bytes) -> None:
        self.key = key
        type(self).made.append(key)


def make_counted() -> type[Made]:
    class Counted(Made):
        made: ClassVar[list[bytes]] = []

    return Counted


def memories(ledger: MemoryLedger, n: int, user: str = "alice") -> list[UUID]:
    made = []
    for i in range(n):
        outcome = ledger.create_memory(
            user, scope=Scope.global_(), memory_key=f"k{i}", content=f"note {i}", category="fact"
        )
        assert outcome.memory is not None
        made.append(outcome.memory.memory_id)
    return made


def gone(ref: weakref.ref[Made]) -> bool:
    gc.collect()
    return ref() is None


def test_made_once_per_key_and_from_that_key(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    first, second = memories(ledger, 2)
    reader = make_ledger()  # a cold cache, like a rebuild's process
    make = make_counted()
    made = reader.keys.derived(first, make)
    assert made is not None and made.key == reader.keys.get(first)
    assert reader.keys.derived(first, make) is made
    assert reader.keys.derived(second, make) is not made
    assert len(make.made) == 2
    other = make_counted()  # another kind of result is made apart
    assert reader.keys.derived(first, other) is not made and len(other.made) == 1


def test_a_forgotten_key_takes_what_was_made_of_it(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    kept, forgotten = memories(ledger, 2)
    make = make_counted()
    made = ledger.keys.derived(forgotten, make)
    assert made is not None
    ref = weakref.ref(made)
    del made
    ledger.forget_memory("alice", forgotten)  # shredded here: dropped at once
    assert gone(ref)
    assert ledger.keys.derived(forgotten, make) is None
    assert ledger.keys.derived(kept, make) is not None
    reader = make_ledger()  # another process: its key is gone there too
    assert reader.keys.derived(forgotten, make) is None


def test_clearing_expiry_and_eviction_drop_what_was_made(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    ids = memories(ledger, 3)
    make = make_counted()
    made = ledger.keys.derived(ids[0], make)
    assert made is not None
    ref = weakref.ref(made)
    del made
    ledger.keys.forget_all_cached()  # e.g. after erasing a user
    assert gone(ref)
    assert ledger.keys.derived(ids[0], make) is not None and len(make.made) == 2

    expiring = make_ledger(key_cache_ttl=0.0)  # every cached key has expired at once
    assert expiring.keys.derived(ids[0], make) is not None
    assert expiring.keys.derived(ids[0], make) is not None
    assert len(make.made) == 4  # made again each time, never kept past the key's ttl

    small = DataKeyStore(ledger._datastore, ledger.keyring, cache_size=2)
    made = small.derived(ids[0], make)
    assert made is not None
    ref = weakref.ref(made)
    del made
    small.prefetch(ids[1:])  # two more keys: the first is evicted, and what it made
    assert gone(ref)


def test_unknown_staged_and_user_keys(
    ledger: MemoryLedger, make_ledger: Callable[..., MemoryLedger]
) -> None:
    make = make_counted()
    assert ledger.keys.derived(uuid4(), make) is None
    staged_id = uuid4()
    staged = ledger.keys.stage(staged_id, "alice", "memory")
    assert ledger.keys.derived(staged_id, make) is not None
    assert ledger.keys.derived(staged_id, make) is not None
    assert len(make.made) == 2  # not cached while its save may fail
    ledger.keys.discard([staged])
    assert ledger.keys.derived(staged_id, make) is None

    reader = make_ledger()
    made = reader.keys.user_derived("bob", make)  # created on first use, as user_key
    assert made.key == reader.keys.user_key("bob") == ledger.keys.user_key("bob")
    assert reader.keys.user_derived("bob", make) is made
