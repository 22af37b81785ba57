"""The lexical ranker of `search_core_memories`: `LexicalRanker().rank(Query.of(text), rows, now=)`.

A memory matches when its key equals the query (as a normalised key), when the query occurs in
it as a phrase, when it shares at least `MIN_MATCHED` term weight with the query, or when the
query names its category ("preferences", "目标"). Matches are ordered by key match, then
phrase, then matched term weight (of key and content), then the weight the key's words alone
match (a memory about the thing asked for: "Go 版本" prefers `go_version`), then category, then
freshness (a memory past its `review_after` and not confirmed since ranks below an otherwise
equal one), then newer `updated_at`, then id. No match gives no items: there is never a
fallback to the full list.

`judge` returns a `Judgement` per row: whether it matches, why (key, phrase, terms, category)
and its sort key; the hybrid ranker reads the same judgement. The ranker reads the query only
through `Query` (its normalised forms): case, width and punctuation never change a result.
Tuning history and the labelled set: docs/retrieval.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from domain.model.values import normalise_content
from projections.views.terms import STRONG, document_terms, word_char
from retrieval.query import Query, Scored, SearchRow, terms_of

__all__ = ["MIN_MATCHED", "Judgement", "LexicalRanker", "has_phrase", "judge"]

MIN_MATCHED: Final = STRONG
"""Matched term weight that makes a memory a match on its own (no key, phrase or category)."""


def _has_phrase(haystack: str, phrase: str) -> bool:
    """`phrase` occurs in `haystack` and does not start or end inside a word."""
    start = haystack.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        clean_start = not (word_char(phrase[0]) and start > 0 and word_char(haystack[start - 1]))
        clean_end = not (word_char(phrase[-1]) and end < len(haystack) and word_char(haystack[end]))
        if clean_start and clean_end:
            return True
        start = haystack.find(phrase, start + 1)
    return False


def has_phrase(phrase: str, memory_key: str, content: str) -> bool:
    """The normalised query `phrase` occurs, word-aligned, in the content or the key's words.

    Only a memory holding every query term can hold the phrase (the narrow fetch relies on it).
    """
    return bool(phrase) and (
        _has_phrase(normalise_content(content), phrase)
        or _has_phrase(memory_key.replace("_", " "), phrase)
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    """The lexical ranker's verdict on one row for one query."""

    row: SearchRow
    key_match: bool
    """The query, as a key, is the row's `memory_key`."""
    phrased: bool
    """The query occurs in the row as a phrase."""
    matched: int
    """The query's term weight the row holds (key words and content)."""
    category: bool
    """The query names the row's category."""
    coverage: float
    """`matched` as a share of the query's term weight, 0..1."""
    order: tuple[Any, ...]
    """The sort key: smaller ranks first."""

    @property
    def matches(self) -> bool:
        """The row is a lexical match."""
        return self.key_match or self.phrased or self.category or self.matched >= MIN_MATCHED

    @property
    def score(self) -> float:
        """The relevance reported with a match: key 8, phrase 4, coverage 0..2, category 1."""
        return 8 * self.key_match + 4 * self.phrased + 2 * self.coverage + self.category


def judge(q: Query, row: SearchRow, now: datetime, *, phrased: bool | None = None) -> Judgement:
    """The verdict on `row`; `phrased` overrides the phrase test (to bound rows not seen).

    Matched weight orders as coverage does: the total is the same for every row of a query.
    """
    matched = q.matched(terms_of(row))
    in_key = (
        row.key_terms
        if row.key_terms is not None
        else document_terms(row.memory_key.replace("_", " "))
    )
    key_match = bool(q.key) and q.key == row.memory_key
    if phrased is None:
        phrased = has_phrase(q.phrase, row.memory_key, row.content)
    category = row.category in q.named
    order = (
        not key_match,
        not phrased,
        -matched,
        -q.matched(in_key),
        not category,
        row.is_due_for_review(now),
        -row.updated_at.timestamp(),
        str(row.memory_id),
    )
    coverage = matched / q.total if q.total else 0.0
    return Judgement(row, key_match, phrased, matched, category, coverage, order)


class LexicalRanker:
    """Deterministic lexical ranking (section 10, first version); see the module docstring."""

    version = "lexical-2"

    def judged(self, query: Query, rows: Sequence[SearchRow], *, now: datetime) -> list[Judgement]:
        """The matching rows' judgements, best first."""
        found = [j for j in (judge(query, row, now) for row in rows) if j.matches]
        found.sort(key=lambda j: j.order)
        return found

    def rank(self, query: Query, rows: Sequence[SearchRow], *, now: datetime) -> list[Scored]:
        """Matches only, best first."""
        return [Scored(j.row, j.score) for j in self.judged(query, rows, now=now)]
