"""The sealing mapper's codec: the library's JSONTranscoder and Mapper, minus per-call setup,
through the json module's public API only.

`encoder(transcoder)` and `decoder(transcoder)` return functions that give the very bytes and
values the transcoder's own `encode` and `decode` give; for any transcoder other than the
library's plain JSONTranscoder they are those methods themselves. `new_event(cls, state)`
builds a domain event from its decoded state as the library's `Mapper.to_domain_event` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import JSONTranscoder, Transcoder

__all__ = ["decoder", "encoder", "new_event"]


def encoder(transcoder: Transcoder) -> Callable[[Any], bytes]:
    """`transcoder.encode`, or for the library's JSONTranscoder, a JSONEncoder of the same
    configuration that keeps no circular-reference memo (`check_circular=False`).

    It takes the transcoder's default, separators and escaping, so it writes the same bytes
    (tests/domain/ledger/test_sealing_encoding.py checks); event states are dataclass fields,
    never circular, so the memo the library's encoder fills on every call is not needed.
    """
    library = getattr(transcoder, "encoder", None)
    if (
        type(transcoder) is not JSONTranscoder
        or type(library) is not json.JSONEncoder
        or library.indent is not None
        or (library.sort_keys, library.skipkeys, library.ensure_ascii) != (False, False, False)
        or not library.allow_nan
    ):
        return transcoder.encode
    to_text = json.JSONEncoder(
        skipkeys=False,
        ensure_ascii=False,
        check_circular=False,
        allow_nan=True,
        sort_keys=False,
        indent=None,
        separators=(library.item_separator, library.key_separator),
        default=library.default,
    ).encode

    def encode(obj: Any) -> bytes:
        return to_text(obj).encode("utf8")

    return encode


def decoder(transcoder: Transcoder) -> Callable[[bytes], Any]:
    """`transcoder.decode`, reading with its JSONDecoder's `raw_decode` when that is the
    transcoder (no whitespace scan before and after the document).

    Any input `raw_decode` does not take whole (leading or trailing text, invalid JSON) goes to
    the transcoder itself, so results and errors are exactly its own.
    """
    library = getattr(transcoder, "decoder", None)
    if type(transcoder) is not JSONTranscoder or not isinstance(library, json.JSONDecoder):
        return transcoder.decode
    raw_decode = library.raw_decode

    def decode(data: bytes) -> Any:
        text = data.decode("utf8")
        try:
            value, end = raw_decode(text)
        except json.JSONDecodeError:
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
