"""A search query analysed once: `Query.of(text)` is passed down to every stage of a search.

The cache keys on `normal` and `key`; the fetch, the lexical and the hybrid rankers read
`terms`, `phrase`, `key` and `named`; the embedder and the glossary read `normal`. No stage
normalises or tokenises the query again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

from domain.model.text import normalise_content, normalise_key
from projections.views.terms import document_terms, query_terms

__all__ = ["CATEGORY_WORDS", "Query", "named_categories"]

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


def named_categories(query: str) -> frozenset[str]:
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
    key: str
    """`normalise_key(text)`: an exact `memory_key` match."""
    terms: Mapping[str, int]
    """Weighted terms (`projections.views.terms.query_terms`)."""
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
            named_categories(normal),
        )

    def matched(self, found: Collection[str]) -> int:
        """The weight of the query terms among `found`."""
        return sum(w for t, w in self.terms.items() if t in found)

    def coverage(self, found: Collection[str]) -> float:
        """The share of the query's term weight among `found`, 0..1 (0 without terms)."""
        return self.matched(found) / self.total if self.total else 0.0
