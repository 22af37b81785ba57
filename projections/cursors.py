"""Opaque page cursors: a short JSON list, URL-safe base64 without padding.

Each reader of a cursor says what the list must hold (`decode`'s `parse`); whatever is not a
cursor of that reader's (not base64, not JSON, not a list, or `parse` refuses it) is
InvalidCursor, which the API answers 422.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["InvalidCursor", "decode", "encode"]

T = TypeVar("T")


class InvalidCursor(ValueError):
    """A pagination cursor that this API did not hand out."""


def encode(*values: Any) -> str:
    """The cursor of these JSON values."""
    raw = json.dumps(list(values), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, parse: Callable[[list[Any]], T]) -> T:
    """What `parse` makes of the cursor's values; its ValueError or TypeError, like any cursor
    that `encode` did not make, raises InvalidCursor."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(values, list):
            raise ValueError(cursor)
        return parse(values)
    except (ValueError, TypeError) as error:
        raise InvalidCursor("cursor is not one this API returned") from error
