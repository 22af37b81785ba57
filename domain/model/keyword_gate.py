"""Which of many keywords may occur in a text, in one regex pass (a prefilter for rule scans).

`KeywordGate(keywords).possible(text)` returns a set holding every keyword that occurs in
`text`, and possibly a few that do not (never fewer): a rule that needs one of its keywords
can be skipped when none of them is in the set, without changing what the rules find.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["KeywordGate"]


def _may_start_inside(outer: str, inner: str) -> bool:
    """True when an occurrence of `inner` can begin within an occurrence of `outer`."""
    return any(
        outer[i:].startswith(inner) or inner.startswith(outer[i:]) for i in range(len(outer))
    )


class KeywordGate:
    """A single alternation of literal keywords, matched without any case folding."""

    def __init__(self, keywords: Iterable[str]) -> None:
        words = sorted(set(keywords), key=lambda w: (-len(w), w))  # longest first
        if not words or "" in words:
            raise ValueError("a keyword gate needs non-empty keywords")
        self._pattern = re.compile("|".join(map(re.escape, words)))
        # One scan reports non-overlapping matches only: a keyword starting inside a reported
        # one may be hidden by it, so each report stands for the keywords it could hide.
        self._covers = {
            word: frozenset(other for other in words if _may_start_inside(word, other))
            for word in words
        }

    def possible(self, text: str) -> frozenset[str]:
        """A superset of the keywords occurring in `text` (empty when none occurs)."""
        found = set(self._pattern.findall(text))
        if not found:
            return frozenset()
        if len(found) == 1:
            return self._covers[found.pop()]
        return frozenset().union(*(self._covers[word] for word in found))
