"""The constrained strings of the HTTP edge: bounded, and free of control characters.

Every text a request carries uses one of these, so a value PostgreSQL cannot store (NUL) or a
log line could misread never gets past the edge (422). The limits are the domain's, which checks
again (domain/model/values.py); lone surrogates are refused by pydantic itself.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, Field

from domain.model.values import ID_PATTERN, MAX_CONTENT_CHARS, MAX_ID_CHARS, MAX_KEY_CHARS

__all__ = [
    "CURSOR_PATTERN",
    "ID_PATTERN",
    "LINE_PATTERN",
    "MAX_QUERY_CHARS",
    "TEXT_PATTERN",
    "Content",
    "Identifier",
    "Key",
    "Query",
]

MAX_QUERY_CHARS: Final = 500
# C0 and C1 controls and DEL; multi-line text keeps tab, line feed and carriage return.
LINE_PATTERN: Final = "^[^\\x00-\\x1f\\x7f-\\x9f]*$"
TEXT_PATTERN: Final = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f]*$"
CURSOR_PATTERN: Final = "^[A-Za-z0-9_-]{1,500}$"
_LINE: Final = re.compile(LINE_PATTERN)
_TEXT: Final = re.compile(TEXT_PATTERN)


def _no_controls(pattern: re.Pattern[str], allowed: str) -> AfterValidator:
    def check(value: str) -> str:
        if pattern.fullmatch(value) is None:
            raise ValueError(f"must not contain control characters{allowed}")
        return value

    return AfterValidator(check)


Content = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        json_schema_extra={"pattern": TEXT_PATTERN},
    ),
    _no_controls(_TEXT, " (tab and newlines are fine)"),
]
"""A memory's content: multi-line text, at most the domain's MAX_CONTENT_CHARS."""

Key = Annotated[
    str,
    Field(min_length=1, max_length=MAX_KEY_CHARS, json_schema_extra={"pattern": LINE_PATTERN}),
    _no_controls(_LINE, ""),
]
"""A memory key as given (the domain normalises it), at most MAX_KEY_CHARS."""

Query = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, json_schema_extra={"pattern": TEXT_PATTERN}),
    _no_controls(_TEXT, " (tab and newlines are fine)"),
]
"""A search query."""

Identifier = Annotated[str, Field(max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
"""An identifier stored in clear (user id, conversation id): ID_PATTERN."""
