"""The crypto-shredding mapper without a database: sealing, redaction, tampering, upcasting."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, ClassVar
from uuid import UUID, uuid4

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    DatetimeAsISO,
    JSONTranscoder,
    MapperDeserialisationError,
    StoredEvent,
    UUIDAsHex,
)

from domain.ledger.sealing import MissingDataKey, SealingMapper, _aad
from domain.model.events import REDACTED, PersonalData, is_redacted
from domain.model.memory import Memory


class FakeKeys:
    """A dict of raw keys, as the mapper's DataKeys."""

    def __init__(self) -> None:
        self.keys: dict[UUID, bytes] = {}

    def get(self, key_id: UUID) -> bytes | None:
        return self.keys.get(key_id)

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        pass


@pytest.fixture
def keys() -> FakeKeys:
    return FakeKeys()


@pytest.fixture
def mapper(keys: FakeKeys) -> SealingMapper:
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return SealingMapper(transcoder, keys)


def created(memory_id: UUID, content: str = "I prefer examples first") -> Any:
    memory = Memory.new(
        memory_id,
        user_id="alice",
        scope_type="global",
        workspace_type=None,
        memory_key="style",
        content=content,
        content_hash="h",
        category="preference",
        source_type="explicit",
        changed_via="user_api",
        source_candidate_id=None,
        review_after=None,
        expires_at=None,
    )
    return memory.collect_events()[0]


def test_personal_fields_are_sealed_and_audit_fields_stay_clear(
    mapper: SealingMapper, keys: FakeKeys
) -> None:
    memory_id = uuid4()
    keys.keys[memory_id] = os.urandom(32)
    stored = mapper.to_stored_event(created(memory_id))
    assert b"examples" not in stored.state and b"style" not in stored.state
    assert b'"alice"' in stored.state and b'"global"' in stored.state
    event = mapper.to_domain_event(stored)
    assert (event.content, event.memory_key) == ("I prefer examples first", "style")


def test_a_destroyed_key_reads_as_redacted_placeholders(
    mapper: SealingMapper, keys: FakeKeys
) -> None:
    memory_id = uuid4()
    keys.keys[memory_id] = os.urandom(32)
    stored = mapper.to_stored_event(created(memory_id))
    del keys.keys[memory_id]
    event = mapper.to_domain_event(stored)
    assert is_redacted(event) and event.content == REDACTED and event.user_id == "alice"


def test_writing_personal_data_without_a_key_is_refused(mapper: SealingMapper) -> None:
    with pytest.raises(MissingDataKey):
        mapper.to_stored_event(created(uuid4()))


def test_a_sealed_payload_cannot_move_to_another_event(
    mapper: SealingMapper, keys: FakeKeys
) -> None:
    memory_id = uuid4()
    keys.keys[memory_id] = os.urandom(32)
    stored = mapper.to_stored_event(created(memory_id))
    moved = StoredEvent(stored.originator_id, 2, stored.topic, stored.state)
    with pytest.raises(MapperDeserialisationError):
        mapper.to_domain_event(moved)


class Note(Aggregate):
    """A test-only aggregate whose event gained a field in version 2."""

    TOPIC = "memledger-test:Note"

    class Created(Aggregate.Created, PersonalData):
        TOPIC = "memledger-test:Note.Created"
        PERSONAL: ClassVar[tuple[str, ...]] = ("text",)
        class_version = 2
        text: str
        language: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["language"] = "und"

    def __init__(self, text: str, language: str) -> None:
        self.text, self.language = text, language


def test_old_event_versions_are_upcast_after_decryption(
    mapper: SealingMapper, keys: FakeKeys
) -> None:
    note = Note(text="hello", language="en")
    keys.keys[note.id] = os.urandom(32)
    current = mapper.to_stored_event(note.collect_events()[0])
    assert mapper.decode_state(current, ("text",))["class_version"] == 2

    # What version 1 of the class wrote: no `language`, no class_version, sealed text.
    state = mapper.decode_state(current, ("text",))
    secret = {"text": state.pop("text")}
    del state["class_version"], state["language"]
    clear = mapper.transcoder.encode(state)
    nonce = os.urandom(12)
    aad = _aad(note.id, 1, current.topic, clear)
    sealed = AESGCM(keys.keys[note.id]).encrypt(nonce, mapper.transcoder.encode(secret), aad)
    v1 = StoredEvent(
        note.id, 1, current.topic, b"MLS1" + len(clear).to_bytes(4, "big") + clear + nonce + sealed
    )

    event = mapper.to_domain_event(v1)
    assert (event.text, event.language) == ("hello", "und")


class CountingTranscoder(JSONTranscoder):
    """Counts the documents it decodes."""

    def __init__(self) -> None:
        super().__init__()
        self.decoded = 0

    def decode(self, data: bytes) -> Any:
        self.decoded += 1
        return super().decode(data)


class RefreshedKeys(FakeKeys):
    def refresh(self, key_ids: Iterable[UUID], destroyed: Iterable[UUID] = ()) -> None:
        pass


def test_a_fresh_batch_decodes_each_events_clear_part_once_to_the_same_events() -> None:
    from eventsourcing.persistence import Notification

    from projections.envelope import decode_batch

    keys = RefreshedKeys()
    transcoder = CountingTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    mapper = SealingMapper(transcoder, keys)
    sealed, shredded = uuid4(), uuid4()
    keys.keys[sealed] = os.urandom(32)
    keys.keys[shredded] = os.urandom(32)
    stored = [mapper.to_stored_event(created(m)) for m in (sealed, shredded)]
    del keys.keys[shredded]  # forgotten: its personal fields read REDACTED
    notes = [
        Notification(
            id=i + 1,
            originator_id=s.originator_id,
            originator_version=s.originator_version,
            topic=s.topic,
            state=s.state,
        )
        for i, s in enumerate(stored)
    ]

    transcoder.decoded = 0
    batch = decode_batch(mapper, notes)

    # per event: its clear part once, the sealed part of the one whose key is there once
    assert transcoder.decoded == 3
    alone = [mapper.to_domain_event(s) for s in stored]
    assert [e.event.__dict__ for e in batch] == [a.__dict__ for a in alone]
    assert batch[0].event.content == "I prefer examples first"
    assert batch[1].event.content == REDACTED
    assert mapper.to_domain_event(stored[0], mapper.clear_state(stored[0])).__dict__ == (
        alone[0].__dict__
    )
