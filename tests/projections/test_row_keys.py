"""What a seal makes of a key: the very bytes of the one-shot calls, and a bounded term memo."""

from __future__ import annotations

import gc
import hashlib
import hmac
import os
import weakref
from collections.abc import Callable
from typing import TypeVar
from uuid import UUID, uuid4

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from projections.row_keys import DataKey, Hmac, TermMemo, UserKey
from projections.sealed import (
    _SEALS,
    TERM_MEMO,
    RowSeal,
    register,
    registered,
    seal_for,
)

_T = TypeVar("_T")


def one_shot_seal(key: bytes, aad: bytes, data: bytes) -> bytes:
    """The sealing of issue 14 as first written: a one-shot HMAC nonce, a new AES-GCM."""
    nonce = hmac.digest(key, aad + b"\x00" + data, "sha256")[:12]
    return b"\x01" + nonce + AESGCM(key).encrypt(nonce, data, aad)


def one_shot_hash(user_key: bytes, purpose: str, text: str) -> str:
    key = hmac.digest(user_key, f"memledger:rows:{purpose}".encode(), "sha256")
    return hmac.digest(key, text.encode(), "sha256")[:10].hex()


def one_shot_term(user_key: bytes, text: str) -> int:
    """A term's stored hash: the HMAC's first 64 bits as a signed (int8) integer."""
    key = hmac.digest(user_key, b"memledger:rows:term", "sha256")
    return int.from_bytes(hmac.digest(key, text.encode(), "sha256")[:8], "big", signed=True)


class Keys:
    """A key store that makes afresh on every call (no caching: what each call made shows)."""

    def __init__(self) -> None:
        self.data: dict[UUID, bytes] = {}
        self.users: dict[str, bytes] = {}

    def derived(self, key_id: UUID, make: Callable[[bytes], _T]) -> _T | None:
        key = self.data.get(key_id)
        return None if key is None else make(key)

    def user_derived(self, user_id: str, make: Callable[[bytes], _T]) -> _T:
        return make(self.users.setdefault(user_id, os.urandom(32)))

    def prefetch(self, key_ids: object) -> None:
        pass


def test_sealing_gives_the_bytes_of_the_one_shot_calls_and_opens_them() -> None:
    key = os.urandom(32)
    sealer = DataKey(key)
    for text in ["", "tea, no sugar", "学习数据库时我更喜欢先看例子", "x" * 5000]:
        aad = b"active_memories|some-row|content"
        sealed = sealer.seal(aad, text.encode())
        assert sealed == one_shot_seal(key, aad, text.encode())
        assert sealer.open(aad, sealed) == text.encode()
        assert sealer.open(b"active_memories|another-row|content", sealed) is None


def test_a_seal_opens_and_hashes_as_before() -> None:
    keys = Keys()
    seal = RowSeal(keys)
    memory_id = uuid4()
    keys.data[memory_id] = key = os.urandom(32)
    sealed = seal.seal("search_terms", memory_id, memory_id, "content", "tea, no sugar")
    assert sealed == one_shot_seal(
        key, f"search_terms|{memory_id}|content".encode(), b"tea, no sugar"
    )
    assert seal.open("search_terms", memory_id, memory_id, "content", sealed) == "tea, no sugar"
    del keys.data[memory_id]  # shredded
    assert seal.seal("search_terms", memory_id, memory_id, "content", "tea") == b""
    assert seal.open("search_terms", memory_id, memory_id, "content", sealed) == "[redacted]"
    user_key = keys.users.setdefault("alice", os.urandom(32))
    assert seal.user_hash("alice", "key", "diet") == one_shot_hash(user_key, "key", "diet")
    assert seal.hasher("alice", "term")(["tea", "milk"]) == [
        one_shot_term(user_key, "tea"),
        one_shot_term(user_key, "milk"),
    ]


def test_remembered_term_hashes_stay_within_the_budget_and_right() -> None:
    memo = TermMemo(limit=5)
    users = {name: UserKey(memo, os.urandom(32)) for name in ("alice", "bob")}
    for round_ in range(3):
        for name, user in users.items():
            hasher = user.hasher("term")
            assert user.hasher("term") is hasher
            texts = [f"t{i}" for i in range(7)]
            for _ in range(2):  # the second time, some remembered
                assert hasher(texts) == [one_shot_term(user._key, t) for t in texts], round_
            for i in range(7):
                assert hasher([f"t{i}"]) == [one_shot_term(user._key, f"t{i}")], round_
            remembered = sum(len(r) for u in users.values() for r in u._remembered.values())
            assert remembered <= 5, name
    assert users["alice"].hasher("term")(["t6"]) != users["bob"].hasher("term")(["t6"])
    assert users["alice"].hasher("term")([]) == []
    nothing = UserKey(TermMemo(limit=0), os.urandom(32))
    assert nothing.hasher("term")(["tea"]) == [one_shot_term(nothing._key, "tea")]
    assert not nothing._remembered["term"]


def test_the_budget_does_not_keep_a_dropped_key_alive() -> None:
    memo = TermMemo(limit=100)
    user = UserKey(memo, os.urandom(32))
    user.hasher("term")(["tea"])
    ref = weakref.ref(user)
    del user  # the key store dropped the key's entry
    gc.collect()
    assert ref() is None
    assert not list(memo._users)


def test_term_hashes_are_each_users_own_never_plain_hashes() -> None:
    seal = RowSeal(Keys())
    alice, bob = seal.hasher("alice", "term"), seal.hasher("bob", "term")
    assert alice(["tea"]) != bob(["tea"])
    plain = int.from_bytes(hashlib.sha256(b"tea").digest()[:8], "big", signed=True)
    assert plain not in (*alice(["tea"]), *bob(["tea"]))


def test_hmac_is_the_standard_hmac_sha256() -> None:
    for key_length in (0, 1, 32, 63, 64, 65, 200):
        key = os.urandom(key_length)
        mac = Hmac(key)
        for message in (b"", b"tea", os.urandom(63), os.urandom(64), os.urandom(1000)):
            assert mac.digest(message) == hmac.digest(key, message, "sha256")


def test_only_a_rebuilds_seal_remembers_terms_in_clear() -> None:
    schema = f"row_keys_{uuid4().hex[:8]}"
    keys = Keys()
    live = register(schema, keys)
    try:
        user = UserKey(TermMemo(live.memo), os.urandom(32))
        user.hasher("term")(["tea"])
        assert live.memo == 0 and not user._remembered["term"]  # the worker's, the API's
        with registered(schema, keys, memo=TERM_MEMO) as rebuilding:
            assert seal_for(schema) is rebuilding and rebuilding.memo == TERM_MEMO
        assert seal_for(schema) is live
    finally:
        _SEALS.pop(schema, None)
