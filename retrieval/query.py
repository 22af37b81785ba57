"""A search query analysed once, the rows it is matched against, and the lexical judgement.

`Query.of(text)` is passed down to every stage of a search: the cache keys on `normal` and
`memory_key`; the fetch, the lexical and the hybrid rankers read `terms`, `phrase`,
`memory_key` and `named`;
the embedder and the glossary read `normal`. No stage normalises or tokenises the query again.
`SearchRow` is a memory as retrieval ranks it: the fields ranking reads (no user, revision or
creation time) and the memory's terms, from the narrow fetch's columns or from a read-model
`MemoryRow` (`SearchRow.of`); `judge(query, row, now)` returns a `Judgement`
(key match, phrase, matched weight, category, coverage, sort key), which the fusion
(retrieval/fusion.py) reads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from domain.ledger.results import MemoryRow
from domain.model.values import normalise_content, normalise_key
from domain.policy import retrievable
from projections.tokens import STRONG, document_terms, key_words, query_terms, word_char

__all__ = [
    "CATEGORY_WORDS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MIN_MATCHED",
    "Judgement",
    "Query",
    "Scored",
    "SearchRow",
    "due_for_review",
    "judge",
]

DEFAULT_LIMIT: Final = 5
"""Items a search returns unless the caller asks for fewer or more (section 10)."""
MAX_LIMIT: Final = 20
"""The most items one search may ask for."""

# fmt: off
CATEGORY_WORDS: Final[Mapping[str, frozenset[str]]] = {
    "preference": frozenset((
        "preference", "prefer", "like", "favourite", "favorite",
        "偏好", "喜好", "喜欢", "习惯", "好み", "好き",
    )),
    "goal": frozenset((
        "goal", "aim", "objective", "target", "plan", "目标", "目的", "计划", "打算", "目標",
    )),
    "constraint": frozenset((
        "constraint", "limit", "restriction", "rule", "avoid",
        "约束", "限制", "禁止", "规则", "不能",
    )),
    "background": frozenset(("background", "experience", "history", "背景", "经历", "经验")),
    "fact": frozenset(("fact", "事实", "事實")),
    "profile": frozenset(("profile", "画像", "资料", "档案")),
    "project": frozenset(("project", "项目", "課題", "プロジェクト")),
    "other": frozenset(("other", "其他", "其它")),
}
# fmt: on
"""Words (stemmed) and CJK bigrams by which a query names a category."""


def _named_categories(query: str) -> frozenset[str]:
    """The categories a query names ("my preferences"; stop words count here)."""
    said = document_terms(query)
    return frozenset(category for category, words in CATEGORY_WORDS.items() if words & said)


@dataclass(frozen=True, slots=True)
class Query:
    """What every stage of a search reads of the query."""

    text: str
    """As the agent sent it."""
    normal: str
    """`normalise_content(text)`: the cache, the embedder and the glossary read this form."""
    memory_key: str
    """`normalise_key(text)`: the query read as a memory key (an exact `memory_key` match)."""
    terms: Mapping[str, int]
    """Weighted terms (`projections.tokens.query_terms`)."""
    total: int
    """The sum of the term weights."""
    phrase: str
    """`normal` when the query has terms, else empty (no phrase test)."""
    named: frozenset[str]
    """The categories the query names."""

    @classmethod
    def of(cls, text: str) -> Query:
        """Normalised and tokenised, once."""
        normal = normalise_content(text)
        terms = query_terms(normal, normal=True)
        return cls(
            text,
            normal,
            normalise_key(text),
            terms,
            sum(terms.values()),
            normal if terms else "",
            _named_categories(normal),
        )

    def matched(self, found: Collection[str]) -> int:
        """The weight of the query terms among `found`."""
        return sum(w for t, w in self.terms.items() if t in found)


@dataclass(frozen=True, slots=True)
class SearchRow:
    """A memory as retrieval ranks it: a search_terms row of the fetch, or a `MemoryRow`."""

    memory_id: UUID
    memory_key: str
    content: str
    category: str
    scope_type: str
    workspace_type: str | None
    source_type: str
    status: str
    updated_at: datetime
    review_after: datetime | None = None
    last_confirmed_at: datetime | None = None
    expires_at: datetime | None = None
    terms: frozenset[str] | None = None
    """`index_terms(memory_key, content)` when stored by the projection (else computed), or only
    the query's terms among them (the fetch's rows): ranking reads no other term of a row."""
    key_terms: frozenset[str] | None = None
    """`key_terms(memory_key)` when stored by the projection (else computed), or the query's
    terms among them (as `terms`)."""
    normal: str | None = None
    """`normalise_content(content)` when the fetch computed it once for every judgement of the
    row (else computed by each)."""

    @classmethod
    def of(cls, memory: MemoryRow) -> SearchRow:
        """From a read-model row (its terms computed when judged)."""
        return cls(
            memory.memory_id,
            memory.memory_key,
            memory.content,
            memory.category,
            memory.scope_type,
            memory.workspace_type,
            memory.source_type,
            memory.status,
            memory.updated_at,
            memory.review_after,
            memory.last_confirmed_at,
            memory.expires_at,
        )

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SearchRow:
        """From the columns the fetch reads (retrieval/fetch_sql.py; extra ones are ignored)."""
        values: dict[str, Any] = {name: row.get(name) for name in cls.__dataclass_fields__}
        for name in ("terms", "key_terms"):
            if values[name] is not None:
                values[name] = frozenset(values[name])
        return cls(**values)

    def is_retrievable(self, now: datetime) -> bool:
        """Active and not expired (section 9.4)."""
        return retrievable(self.status, self.expires_at, now)

    def is_due_for_review(self, now: datetime) -> bool:
        """Past `review_after` and not confirmed since: ranked below otherwise equal ones."""
        return due_for_review(self.review_after, self.last_confirmed_at, now)


def _terms_of(row: SearchRow) -> frozenset[str]:
    """The row's terms: those stored by the search_terms view, else computed alike."""
    if row.terms is not None:
        return row.terms
    return document_terms(f"{row.memory_key.replace('_', ' ')} {row.content}")


def due_for_review(
    review_after: datetime | None, last_confirmed_at: datetime | None, now: datetime
) -> bool:
    """True once `review_after` has passed without a confirmation since (section 9.4)."""
    if review_after is None or review_after > now:
        return False
    return last_confirmed_at is None or last_confirmed_at < review_after


@dataclass(frozen=True, slots=True)
class Scored:
    """A matching row and its relevance (higher is better; ties are the ranker's)."""

    row: SearchRow
    score: float


MIN_MATCHED: Final = STRONG
"""Matched term weight that makes a memory a match on its own (no key, phrase or category)."""


def _has_phrase(phrase: str, memory_key: str, content: str, normal: str | None) -> bool:
    """The normalised query `phrase` occurs, word-aligned, in the content or the key's words.

    Only a memory holding every query term can hold the phrase (the narrow fetch relies on it).
    `normal`: `normalise_content(content)`, when already known.
    """
    if not phrase:
        return False
    content = normalise_content(content) if normal is None else normal
    for haystack in (content, key_words(memory_key)):
        start = haystack.find(phrase)
        while start >= 0:
            end = start + len(phrase)
            clean_start = not (
                word_char(phrase[0]) and start > 0 and word_char(haystack[start - 1])
            )
            clean_end = not (
                word_char(phrase[-1]) and end < len(haystack) and word_char(haystack[end])
            )
            if clean_start and clean_end:
                return True
            start = haystack.find(phrase, start + 1)
    return False


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


def judge(q: Query, row: SearchRow, now: datetime, *, phrased: bool | None = None) -> Judgement:
    """The verdict on `row`; `phrased` overrides the phrase test (to bound rows not seen).

    Matched weight orders as coverage does: the total is the same for every row of a query.
    """
    matched = q.matched(_terms_of(row))
    in_key = (
        row.key_terms if row.key_terms is not None else document_terms(key_words(row.memory_key))
    )
    key_match = bool(q.memory_key) and q.memory_key == row.memory_key
    if phrased is None:
        phrased = _has_phrase(q.phrase, row.memory_key, row.content, row.normal)
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
