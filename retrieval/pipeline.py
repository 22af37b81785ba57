"""The search pipeline over fetched rows: visible ones, ranked, cut to the item and token budgets.

`search(rows, query, workspace=, now=)` drops what the agent may not see
(retrieval/visibility.py), keeps the requested category, ranks with a `Ranker` (lexical by
default, hybrid when vectors are on) and applies the item limit and the token budgets
(retrieval/budget.py). The ranker is the only part meant to be replaced; scope, status and
budget rules stay here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from retrieval.budget import estimate_tokens, truncate
from retrieval.lexical import LexicalRanker
from retrieval.query import Query
from retrieval.rows import Ranker, Scored, SearchRow
from retrieval.visibility import visible_rows

__all__ = [
    "DEFAULT_LIMIT",
    "ITEM_TOKENS",
    "MAX_LIMIT",
    "MIN_CUT_TOKENS",
    "TOTAL_TOKENS",
    "SearchItem",
    "SearchResult",
    "search",
]

DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 20
TOTAL_TOKENS: Final = 600
ITEM_TOKENS: Final = 160
MIN_CUT_TOKENS: Final = 16
"""An item that would have to be cut below this many tokens is left out (and all after it)."""


@dataclass(frozen=True, slots=True)
class SearchItem:
    """A returned memory: its content (perhaps cut) and that content's token estimate."""

    row: SearchRow
    content: str
    tokens: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What search returns, with the sum of the items' tokens."""

    items: list[SearchItem]
    total_tokens: int


def _budget(ranked: Sequence[Scored], limit: int, total: int, per_item: int) -> SearchResult:
    items: list[SearchItem] = []
    used = 0
    for scored in ranked:
        if len(items) == limit:
            break
        cap = min(per_item, total - used)
        content = scored.row.content
        if estimate_tokens(content) > cap:
            if cap < MIN_CUT_TOKENS:
                break  # keep rank order: nothing below a left-out item is returned
            content = truncate(content, cap)
        tokens = estimate_tokens(content)
        items.append(SearchItem(scored.row, content, tokens))
        used += tokens
    return SearchResult(items, used)


def search(
    rows: Iterable[SearchRow],
    query: Query | str,
    *,
    workspace: str,
    now: datetime,
    category: str | None = None,
    limit: int = DEFAULT_LIMIT,
    ranker: Ranker | None = None,
    total_tokens: int = TOTAL_TOKENS,
    item_tokens: int = ITEM_TOKENS,
) -> SearchResult:
    """Retrievable, visible rows ranked for `query`, within the limit and budgets.

    `query`: analysed by the caller (`Query.of`), or its text.
    """
    q = query if isinstance(query, Query) else Query.of(query)
    pool = [
        r for r in visible_rows(rows, workspace, now) if category is None or r.category == category
    ]
    ranked = (ranker or LexicalRanker()).rank(q, pool, now=now)
    return _budget(ranked, max(0, min(limit, MAX_LIMIT)), total_tokens, item_tokens)
