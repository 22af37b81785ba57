"""The sealing mapper's codec (domain/ledger/persistence/codec.py) against the library's own
JSONTranscoder, in the same run: encode and decode of a Memory.Created event's clear state.

Prints µs per call for each side and the codec's ratio to the library (below 1: faster).
Rounds alternate the two sides; the best round of each is printed (as timeit advises: the
others measure what else ran on the machine). No database needed.

    .venv/bin/python scripts/bench_codec.py
    .venv/bin/python scripts/bench_codec.py --calls 20000 --rounds 9 --json
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, UUIDAsHex

from domain.ledger.persistence.codec import decoder, encoder
from domain.model.memory import Memory


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5_000, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=15, help="alternations of the two sides")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser.parse_args()


def event_state() -> dict[str, Any]:
    """The clear state the mapper encodes for a Memory.Created event (personal fields too)."""
    memory = Memory.new(
        uuid4(),
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
    state = dict(vars(event))
    del state["originator_id"], state["originator_version"]
    return state


def per_call_us(work: Callable[[Any], Any], value: Any, calls: int) -> float:
    """µs per call, the garbage collector off (as timeit does: a collection would be charged
    to whichever side it happens in)."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        for _ in range(calls):
            work(value)
        return (time.perf_counter() - started) / calls * 1e6
    finally:
        gc.enable()


def main() -> None:
    args = parse_args()
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    state = event_state()
    data = transcoder.encode(state)
    encode, decode = encoder(transcoder), decoder(transcoder)
    assert encode(state) == data and decode(data) == transcoder.decode(data)
    sides = {
        "encode": (transcoder.encode, encode, state),
        "decode": (transcoder.decode, decode, data),
    }
    results: dict[str, dict[str, float]] = {}
    for name, (library, codec, value) in sides.items():
        per_call_us(library, value, args.calls // 10)  # warm up
        per_call_us(codec, value, args.calls // 10)
        library_us, codec_us = [], []
        for _ in range(args.rounds):
            library_us.append(per_call_us(library, value, args.calls))
            codec_us.append(per_call_us(codec, value, args.calls))
        lib, own = min(library_us), min(codec_us)
        results[name] = {"library_us": lib, "codec_us": own, "ratio": own / lib}
    if args.json:
        print(json.dumps({"bytes": len(data), **results}))
        return
    print(f"state: {len(data)} bytes; best of {args.rounds} rounds of {args.calls} calls")
    for name, row in results.items():
        print(
            f"{name}: library {row['library_us']:.2f} µs, codec {row['codec_us']:.2f} µs,"
            f" ratio {row['ratio']:.2f}"
        )


if __name__ == "__main__":
    main()
