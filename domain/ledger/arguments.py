"""Command arguments: the `UNSET` marker, and checks of arguments no aggregate owns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from domain.errors import InvalidInput

__all__ = ["UNSET", "check_origin"]

UNSET: Final[Any] = object()
"""Marks an optional command argument the caller did not give (None means 'clear it')."""

_MAX_ORIGIN_ITEMS: Final = 16
_MAX_ORIGIN_CHARS: Final = 200


def check_origin(origin: Mapping[str, str] | None) -> dict[str, str] | None:
    """A small dict of short strings (stored in clear: never content, keys or names)."""
    if origin is None:
        return None
    if len(origin) > _MAX_ORIGIN_ITEMS:
        raise InvalidInput("origin", f"must have at most {_MAX_ORIGIN_ITEMS} items")
    for name, value in origin.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidInput("origin", "names and values must be strings")
        if not name or len(name) > 64 or len(value) > _MAX_ORIGIN_CHARS:
            raise InvalidInput("origin", "names and values must be short")
    return dict(origin)
