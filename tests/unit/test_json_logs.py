"""Structured logs: one JSON object per line, with ids and no exception messages."""

from __future__ import annotations

import json
import logging

from api.middleware import JsonFormatter


def record(**extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("memledger.api", logging.INFO, __file__, 1, "request", (), None)
    entry.__dict__.update(extra)
    return entry


def test_extra_fields_become_json_keys() -> None:
    line = json.loads(
        JsonFormatter().format(record(request_id="r1", user_id="alice", memory_ids=["m1"]))
    )
    assert (line["message"], line["request_id"], line["user_id"], line["memory_ids"]) == (
        "request",
        "r1",
        "alice",
        ["m1"],
    )


def test_exceptions_are_named_without_their_message() -> None:
    try:
        raise ValueError("I love MARKER-CONTENT")
    except ValueError:
        import sys

        entry = record()
        entry.exc_info = sys.exc_info()
    line = JsonFormatter().format(entry)
    assert "ValueError" in line and "MARKER-CONTENT" not in line
