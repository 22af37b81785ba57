"""The sealing mapper's codec: the library's JSONTranscoder and Mapper, minus per-call setup.

`encoder(transcoder)` and `decoder(transcoder)` return functions that give the very bytes and
values the transcoder's own `encode` and `decode` give; for any transcoder other than the
library's plain JSONTranscoder they are those methods themselves. `new_event(cls, state)`
builds a domain event from its decoded state as the library's `Mapper.to_domain_event` does.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import JSONTranscoder, Transcoder

__all__ = ["decoder", "encoder", "new_event"]


def encoder(transcoder: Transcoder) -> Callable[[Any], bytes]:
    """`transcoder.encode`, or for the library's JSONTranscoder, its own C encoder built once.

    `JSONEncoder.encode` builds a new C encoder (with a fresh circular-reference memo) on
    every call; the one built here takes the same default, string escaping and separators,
    so it writes the same bytes (tests/domain/ledger/test_sealing_encoding.py checks), without the
    memo: event states are dataclass fields, never circular.
    """
    encoder = getattr(transcoder, "encoder", None)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if (
        type(transcoder) is not JSONTranscoder
        or type(encoder) is not json.JSONEncoder
        or make is None
        or encoder.indent is not None
        or (encoder.sort_keys, encoder.skipkeys, encoder.ensure_ascii) != (False, False, False)
        or not encoder.allow_nan
    ):
        return transcoder.encode
    chunks = make(
        None,  # no circular-reference memo
        encoder.default,
        json.encoder.encode_basestring,
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )

    def encode(obj: Any) -> bytes:
        return "".join(chunks(obj, 0)).encode("utf8")

    return encode


def decoder(transcoder: Transcoder) -> Callable[[bytes], Any]:
    """`transcoder.decode`, calling the JSON scanner directly when that is the transcoder.

    Any input the scanner does not take whole (leading or trailing text, invalid JSON) goes to
    the transcoder itself, so results and errors are exactly its own.
    """
    scan: Callable[[str, int], tuple[Any, int]] | None = None
    if type(transcoder) is JSONTranscoder:  # its decode is this scanner, then checks
        scan = getattr(transcoder.decoder, "scan_once", None)
    if scan is None:
        return transcoder.decode
    scan_once = scan

    def decode(data: bytes) -> Any:
        text = data.decode("utf8")
        try:
            value, end = scan_once(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
        return transcoder.decode(data)

    return decode


def new_event(cls: type[Any], state: dict[str, Any]) -> Any:
    """An event of class `cls` whose attributes are `state` (taken, not copied), built without
    calling its `__init__`: exactly how `Mapper.to_domain_event` builds one."""
    event = object.__new__(cls)
    object.__setattr__(event, "__dict__", state)
    return event
