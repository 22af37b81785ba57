"""The mapper's own JSON encoder writes the very bytes the library's JSONTranscoder writes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, StoredEvent, UUIDAsHex
from eventsourcing.utils import get_topic
from hypothesis import given
from hypothesis import strategies as st

from domain.ledger import sealing
from domain.ledger.persistence.codec import decoder, encoder
from domain.ledger.sealing import SealingMapper, _aad
from domain.model.memory import Memory

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.uuids()
    | st.datetimes(timezones=st.just(UTC)),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def library_transcoder() -> JSONTranscoder:
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return transcoder


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_encoder_writes_the_transcoders_bytes(state: dict[str, Any]) -> None:
    transcoder = library_transcoder()
    assert encoder(transcoder)(state) == transcoder.encode(state)


def test_encoder_writes_the_transcoders_bytes_for_escapes_and_special_floats() -> None:
    transcoder = library_transcoder()
    state = {
        "text": 'quote " backslash \\ newline \n tab \t nul-ish \x01 emoji \U0001f600 中文',
        "floats": [math.inf, -math.inf, 1e308, -0.0],
        "nested": {"when": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "id": uuid4()},
    }
    assert encoder(transcoder)(state) == transcoder.encode(state)


def test_encoder_is_the_transcoders_own_for_other_transcoders() -> None:
    class OtherTranscoder(JSONTranscoder):
        pass

    transcoder = OtherTranscoder()
    assert encoder(transcoder) == transcoder.encode


def _reference_stored_event(transcoder: JSONTranscoder, key: bytes, event: Any) -> StoredEvent:
    """The stored event as the mapper wrote it before its encoding was sped up."""
    cls = type(event)
    topic = get_topic(cls)
    state = dict(vars(event))
    originator_id = state.pop("originator_id")
    version = state.pop("originator_version")
    state["class_version"] = cls.class_version
    secret = {name: state.pop(name) for name in cls.PERSONAL}
    clear = transcoder.encode(state)
    nonce = b"\x07" * 12
    sealed = AESGCM(key).encrypt(
        nonce, transcoder.encode(secret), _aad(originator_id, version, topic, clear)
    )
    stored = b"MLS1" + len(clear).to_bytes(4, "big") + clear + nonce + sealed
    return StoredEvent(originator_id, version, topic, stored)


class _Keys:
    def __init__(self, keys: dict[UUID, bytes]) -> None:
        self.keys = keys

    def get(self, key_id: UUID) -> bytes | None:
        return self.keys.get(key_id)

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        pass


def test_a_sealed_created_event_is_byte_identical_to_the_library_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory_id, key = uuid4(), AESGCM.generate_key(256)
    memory = Memory.new(
        memory_id,
        user_id="alice",
        scope_type="workspace",
        workspace_type="learning",
        memory_key="style",
        content="I prefer examples first — 例子优先",
        content_hash="ab" * 32,
        category="preference",
        source_type="explicit",
        changed_via="user_api",
        source_candidate_id=uuid4(),
        review_after=datetime(2026, 1, 1, tzinfo=UTC),
        expires_at=None,
        origin={"system": "legacy-coremem", "created_at": "2024-05-01T00:00:00Z"},
    )
    (event,) = memory.collect_events()
    transcoder = library_transcoder()
    mapper = SealingMapper(transcoder, _Keys({memory_id: key}))
    monkeypatch.setattr(sealing.os, "urandom", lambda n: b"\x07" * n)

    stored = mapper.to_stored_event(event)

    assert stored == _reference_stored_event(transcoder, key, event)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_decoder_reads_what_the_transcoder_reads(state: dict[str, Any]) -> None:
    transcoder = library_transcoder()
    data = transcoder.encode(state)
    assert decoder(transcoder)(data) == transcoder.decode(data)


@pytest.mark.parametrize("data", [b'{"a": 1} trailing', b' {"a": 1}', b"{bad", b"", b"[1, 2]"])
def test_decoder_answers_odd_input_exactly_as_the_transcoder(data: bytes) -> None:
    transcoder = library_transcoder()
    try:
        expected: Any = transcoder.decode(data)
    except Exception as error:
        with pytest.raises(type(error)):
            decoder(transcoder)(data)
    else:
        assert decoder(transcoder)(data) == expected


def test_decoder_is_the_transcoders_own_for_other_transcoders() -> None:
    class OtherTranscoder(JSONTranscoder):
        pass

    transcoder = OtherTranscoder()
    assert decoder(transcoder) == transcoder.decode
