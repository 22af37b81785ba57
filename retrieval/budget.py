"""What a search result may cost the agent: token estimates, clean truncation, the budgets.

`budget(ranked, limit, total, per_item)` turns ranked rows into a `SearchResult`: at most
`limit` items, at most `per_item` tokens each (a longer content is cut cleanly by `truncate`)
and `total` tokens together (section 10). Tokens are estimated offline (`estimate_tokens`),
never below what real tokenizers count.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from projections.tokens import word_char
from retrieval.query import Scored, SearchRow

__all__ = [
    "ELLIPSIS",
    "ITEM_TOKENS",
    "MIN_CUT_TOKENS",
    "TOTAL_TOKENS",
    "SearchItem",
    "SearchResult",
    "budget",
    "estimate_tokens",
    "truncate",
]

ELLIPSIS: Final = "…"

_PIECES: Final = re.compile(r"[A-Za-z]+|[0-9]+|\s+|.", re.DOTALL)


def estimate_tokens(text: str) -> int:
    """A conservative, offline token count: it should not undercount real tokenizers.

    ASCII letters: ceil(run / 4) per word; digits: ceil(run / 3) per number; each ASCII
    punctuation mark: 1; newlines: 1 each, other whitespace: 0; each CJK, kana or Hangul
    character and each other non-ASCII letter or mark: 1; any other character (symbols,
    emoji): 2. Modern multilingual tokenizers spend about one token or less per Han character.
    """
    tokens = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            tokens += math.ceil(len(piece) / 4)
        elif first.isascii() and first.isdigit():
            tokens += math.ceil(len(piece) / 3)
        elif first.isspace():
            tokens += piece.count("\n")
        elif first.isascii() or unicodedata.category(first)[0] in "LMN":
            tokens += 1
        else:
            tokens += 2
    return tokens


_SENTENCE_END: Final = frozenset(".!?;\n\u3002\uff01\uff1f\uff1b")  # and CJK full stops
_JOINERS: Final = frozenset("\u200d\ufe0e\ufe0f")


def truncate(text: str, max_tokens: int) -> str:
    """`text` itself if it fits in `max_tokens`, else a clean prefix ending in an ellipsis.

    The cut prefers a sentence end, then a space, and never splits a character from its
    combining marks; the result (ellipsis included) is within `max_tokens`.
    """
    if estimate_tokens(text) <= max_tokens:
        return text
    room = max_tokens - estimate_tokens(ELLIPSIS)
    low, high = 0, len(text)
    while low < high:  # the longest prefix within `room` (the estimate only grows with length)
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    cut = _clean_cut(text, low)
    return (text[:cut].rstrip() + ELLIPSIS) if cut else ""


def _clean_cut(text: str, limit: int) -> int:
    floor = limit * 3 // 5  # never give up more than 40 % of what fits for a nicer cut
    for index in range(limit, floor, -1):
        if text[index - 1] in _SENTENCE_END:
            return index
    if 0 < limit < len(text) and word_char(text[limit - 1]) and word_char(text[limit]):
        for index in range(limit, floor, -1):
            if text[index - 1].isspace():
                return index
    cut = limit
    while 0 < cut < len(text) and (unicodedata.combining(text[cut]) or text[cut] in _JOINERS):
        cut -= 1
    return cut


TOTAL_TOKENS: Final = 600
ITEM_TOKENS: Final = 160
MIN_CUT_TOKENS: Final = 16
"""An item that would have to be cut below this many tokens is left out (and all after it)."""


@dataclass(frozen=True, slots=True)
class SearchItem:
    """A returned memory: its content (perhaps cut), that content's token estimate and its
    calibrated relevance (0..1)."""

    row: SearchRow
    content: str
    tokens: int
    relevance: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What search returns, with the sum of the items' tokens."""

    items: list[SearchItem]
    total_tokens: int


def budget(ranked: Sequence[Scored], limit: int, total: int, per_item: int) -> SearchResult:
    """The first `limit` items within `total` tokens, each cut to at most `per_item`; an item
    that would have to be cut below MIN_CUT_TOKENS ends the result (rank order is kept)."""
    items: list[SearchItem] = []
    used = 0
    for scored in ranked:
        if len(items) == limit:
            break
        cap = min(per_item, total - used)
        content = scored.row.content
        if estimate_tokens(content) > cap:
            if cap < MIN_CUT_TOKENS:
                break
            content = truncate(content, cap)
        tokens = estimate_tokens(content)
        items.append(SearchItem(scored.row, content, tokens, scored.score))
        used += tokens
    return SearchResult(items, used)
