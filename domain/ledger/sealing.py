"""The crypto-shredding mapper: seals each event's personal fields with its aggregate's data key.

Stored state of an event with personal fields:
    b"MLS1" | len(clear) as 4 bytes | clear JSON | 12-byte nonce | AES-256-GCM ciphertext
The associated data binds the ciphertext to the aggregate id, the event version, the topic and
the clear part, so no sealed payload can be moved to another event or have its clear fields
altered unnoticed. The clear part also carries the request id of the command
(`domain.context.correlated`). Events without personal fields are stored as plain JSON. When
the data key is gone, every personal field reads as REDACTED instead of raising.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Final, Protocol, cast
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.persistence import (
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.utils import get_topic, resolve_topic

from domain.context import current_request_id
from domain.ledger.persistence import codec
from domain.model.events import REDACTED, personal_fields

__all__ = ["DataKeys", "MissingDataKey", "SealingMapper"]

_MAGIC: Final = b"MLS1"
_NONCE: Final = 12


class DataKeys(Protocol):
    """Where the mapper finds each aggregate's data key (a DataKeyStore, or a test's dict)."""

    def get(self, key_id: UUID) -> bytes | None:
        """The raw data key, or None when it was destroyed (or never existed)."""
        ...

    def prefetch(self, key_ids: Iterable[UUID]) -> None:
        """Load many keys at once before a batch is decoded (may do nothing)."""
        ...


class MissingDataKey(Exception):
    """An event with personal fields was written for an aggregate without a data key."""


def _aad(originator_id: UUID, version: int, topic: str, clear: bytes) -> bytes:
    return f"{originator_id}|{version}|{topic}|".encode() + clear


class SealingMapper(Mapper[UUID]):
    """A Mapper that encrypts personal fields per aggregate and redacts them once shredded."""

    def __init__(self, transcoder: Transcoder, keys: DataKeys) -> None:
        super().__init__(transcoder=transcoder)
        self.keys = keys
        # Decoding is the hot path of replays and rebuilds: what can be reused, is. (Not the
        # AES-GCM objects: they would keep data keys in memory after their shredding.)
        self._classes: dict[str, tuple[type[Any], tuple[str, ...], int]] = {}
        self._topics: dict[type[Any], tuple[str, tuple[str, ...], int]] = {}
        self._encode = codec.encoder(transcoder)
        self._decode = codec.decoder(transcoder)

    def with_keys(self, keys: DataKeys) -> SealingMapper:
        """The same mapping over another key store (see `DataKeyStore.through`)."""
        return SealingMapper(self.transcoder, keys)

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """Encode an event, sealing its personal fields."""
        cls = type(domain_event)
        known = self._topics.get(cls)
        if known is None:
            known = (get_topic(cls), personal_fields(cls), getattr(cls, "class_version", 1))
            self._topics[cls] = known
        topic, fields, class_version = known
        state = dict(vars(domain_event))
        originator_id = state.pop("originator_id")
        version = state.pop("originator_version")
        if class_version > 1:
            state["class_version"] = class_version
        request_id = current_request_id()
        if request_id is not None:
            state.setdefault("request_id", request_id)
        encode = self._encode
        if not fields:
            return StoredEvent(originator_id, version, topic, encode(state))
        secret = {name: state.pop(name) for name in fields}
        data_key = self.keys.get(originator_id)
        if data_key is None:
            raise MissingDataKey(f"no data key for {originator_id}")
        clear = encode(state)
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(data_key).encrypt(
            nonce, encode(secret), _aad(originator_id, version, topic, clear)
        )
        stored = _MAGIC + len(clear).to_bytes(4, "big") + clear + nonce + sealed
        return StoredEvent(originator_id, version, topic, stored)

    def to_domain_event(
        self, stored_event: StoredEvent, clear: dict[str, Any] | None = None
    ) -> Any:
        """Decode an event; personal fields are REDACTED when the data key was destroyed.

        `clear`: its `clear_state`, when the caller read it already (taken, not copied: the
        clear part is then decoded once)."""
        known = self._classes.get(stored_event.topic)
        if known is None:
            cls = resolve_topic(stored_event.topic)
            known = (cls, personal_fields(cls), getattr(cls, "class_version", 1))
            self._classes[stored_event.topic] = known
        cls, fields, class_version = known
        state = self.decode_state(stored_event, fields, clear)
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        from_version = state.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(state)
            from_version += 1
        return codec.new_event(cls, state)

    def clear_state(self, stored: StoredEvent) -> dict[str, Any]:
        """The event's clear attributes, read without any key ({} when unreadable)."""
        data = bytes(stored.state)
        if data.startswith(_MAGIC):
            data = data[8 : 8 + int.from_bytes(data[4:8], "big")]
        try:
            state = self._decode(data)
        except Exception:
            return {}
        return state if isinstance(state, dict) else {}

    def decode_state(
        self, stored: StoredEvent, fields: tuple[str, ...], clear: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The event's attributes (without id and version), decrypted or redacted (`clear`:
        its clear attributes, decoded already; empty or None: decoded here)."""
        data = bytes(stored.state)
        if not data.startswith(_MAGIC):
            state: dict[str, Any] = clear or self._decode(data)
            return state
        length = int.from_bytes(data[4:8], "big")
        clear_part = data[8 : 8 + length]
        state = clear or self._decode(clear_part)
        originator_id = cast(UUID, stored.originator_id)  # the events table stores uuid
        data_key = self.keys.get(originator_id)
        if data_key is None:
            state.update(dict.fromkeys(fields, REDACTED))
            return state
        nonce = data[8 + length : 8 + length + _NONCE]
        sealed = data[8 + length + _NONCE :]
        aad = _aad(originator_id, stored.originator_version, stored.topic, clear_part)
        try:
            secret = self._decode(AESGCM(data_key).decrypt(nonce, sealed, aad))
        except InvalidTag as error:
            msg = (
                f"sealed payload of {stored.originator_id} v{stored.originator_version} is corrupt"
            )
            raise MapperDeserialisationError(msg) from error
        state.update(secret)
        return state
