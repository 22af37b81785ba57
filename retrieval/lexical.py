"""Retrieval for `search_core_memories` (CORE_MEMORY_DESIGN.md section 10): rank, then budget.

`search()` is the whole pipeline over the candidates SQL fetched (the user's active, unexpired
memories in the visible scopes): drop what is not retrievable or not visible, let a workspace
memory hide the global one with the same key, keep the requested category, rank with a
`Ranker`, then apply the item limit and the token budgets. The ranker is the only part meant
to be replaced (by a hybrid one, say); scope, status and budget rules stay here.

The lexical ranker is deterministic. A memory matches when its key equals the query (as a
normalised key), when the query occurs in it as a phrase, when it shares a meaningful term with
the query, or when the query names its category ("preferences", "目标"). Matches are ordered by
key match, then phrase, then term coverage (of key and content), then how much of the query the
key's words alone cover (a memory about the thing asked for: "Go 版本" prefers `go_version`),
then category, then freshness (a memory past its `review_after` and not confirmed since ranks
below an otherwise equal one), then newer `updated_at`, then id. No match gives no items: there
is never a fallback to the full list.

The ranker reads the query only through `normalise_content` and `normalise_key` (the search
cache keys on those forms, retrieval/search.py): case, width and punctuation never change
a result. A candidate from the search_terms projection carries its `index_terms` and `key_terms`,
stored when the memory was projected, so ranking it does not re-tokenise the memory; the
projection's narrow fetch (`Reads.search_candidates`) leaves out only rows that cannot rank within
the limit. tests/retrieval/ holds a labelled set and scripts/eval_retrieval.py measures recall@5
and MRR on it; change the ranking with it at hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from operator import add
from typing import Any, Final, Protocol
from uuid import UUID

from domain.model.text import normalise_content, normalise_key
from domain.policy import is_visible
from retrieval.budget import CJK, CJK_RANGES, ELLIPSIS, estimate_tokens, truncate, word_char

__all__ = [
    "DEFAULT_LIMIT",
    "ELLIPSIS",
    "ITEM_TOKENS",
    "MAX_LIMIT",
    "MIN_MATCHED",
    "STOPWORDS",
    "STOP_CHARS",
    "TOTAL_TOKENS",
    "Candidate",
    "LexicalQuery",
    "LexicalRanker",
    "Ranker",
    "Scored",
    "SearchItem",
    "SearchResult",
    "document_terms",
    "due_for_review",
    "estimate_tokens",
    "has_phrase",
    "index_terms",
    "key_terms",
    "named_categories",
    "query_terms",
    "retrievable",
    "search",
    "shadow_global",
    "truncate",
]

DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 20
TOTAL_TOKENS: Final = 600
ITEM_TOKENS: Final = 160
MIN_CUT_TOKENS: Final = 16
"""An item that would have to be cut below this many tokens is left out (and all after it)."""

_CJK_RANGES: Final = CJK_RANGES
_CJK: Final = CJK
_RUNS: Final = re.compile(f"[{_CJK_RANGES}]+|[^\\W_{_CJK_RANGES}]+")
_CJK_RUNS: Final = re.compile(f"[{_CJK_RANGES}]+")
_WORDS: Final = re.compile(f"[^\\W_{_CJK_RANGES}]+")
_ASCII_WORDS: Final = re.compile("[a-z0-9]+")
# Full-width and CJK punctuation (escaped: several look like ASCII), and the ideographic space.
_CJK_PUNCTUATION: Final = (
    "\uff0c\u3002\u3001\uff1a\uff1b\uff01\uff1f\uff08\uff09\u3010"
    "\u3011\u300a\u300b\u3008\u3009\u300c\u300d\u300e\u300f\u201c"
    "\u201d\u2018\u2019\u2014\u2026\uff5e\u00b7\u3000"
)
_PLAIN_CJK: Final = re.compile(f"[\\x00-\\x7f\\u4e00-\\u9fff{_CJK_PUNCTUATION}]*")
_IDEOGRAPH_GAPS: Final = re.compile(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])")
# fmt: off
_STOPWORDS: Final = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "for", "with", "at", "by",
    "from", "as", "into", "about", "is", "are", "was", "were", "be", "been", "am", "do", "does",
    "did", "have", "has", "had", "i", "me", "my", "mine", "myself", "you", "your", "we", "our",
    "us", "it", "its", "this", "that", "these", "those", "there", "here", "what", "which", "who",
    "whom", "whose", "how", "when", "where", "why", "should", "would", "could", "can", "will",
    "shall", "may", "might", "must", "please", "any", "some", "all", "not", "no", "yes", "than",
    "then", "so", "too", "very", "just", "also", "tell", "know", "remember", "recall",
))
# fmt: on
# Function characters: alone they say nothing, and a bigram of two of them (我的, 什么) neither.
_STOP_CHARS: Final = frozenset(
    "的了是我你他她它们在和与及也都就很吗呢吧啊呀么这那个一有要会对把被给让什怎样哪些为之其"
)
STOPWORDS: Final = _STOPWORDS
"""English words that alone say nothing (never a query term)."""
STOP_CHARS: Final = _STOP_CHARS
"""Chinese function characters (alone, or two of them, never a query term)."""
_STRONG, _WEAK = 2, 1  # term weights: a bigram with one function character counts half
MIN_MATCHED: Final = _STRONG
"""Matched term weight that makes a memory a match on its own (no key, phrase or category)."""

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


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory as retrieval sees it (an `active_memories` row)."""

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
    """`index_terms(memory_key, content)` when stored by the projection (else computed)."""
    key_terms: frozenset[str] | None = None
    """`key_terms(memory_key)` when stored by the projection (else computed)."""

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Candidate:
        """From a projection row (extra columns are ignored)."""
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


def retrievable(status: str, expires_at: datetime | None, now: datetime) -> bool:
    """True for an active memory that has not expired: only those take part in retrieval."""
    return status == "active" and (expires_at is None or expires_at > now)


def due_for_review(
    review_after: datetime | None, last_confirmed_at: datetime | None, now: datetime
) -> bool:
    """True once `review_after` has passed without a confirmation since (section 9.4)."""
    if review_after is None or review_after > now:
        return False
    return last_confirmed_at is None or last_confirmed_at < review_after


@dataclass(frozen=True, slots=True)
class Scored:
    """A matching candidate and its relevance (higher is better; ties are the ranker's)."""

    candidate: Candidate
    score: float


class Ranker(Protocol):
    """Orders candidates for a query; returns matches only, best first."""

    version: str

    def rank(self, query: str, candidates: Sequence[Candidate], *, now: datetime) -> list[Scored]:
        """Matches only (no match: empty), best first, deterministic for equal input."""
        ...


# -- terms -------------------------------------------------------------------------------------


def _stem(word: str) -> str:
    # Plural folding only, applied alike to queries and memories ("examples" ~ "example").
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _bigrams(run: str) -> Iterable[tuple[str, int]]:
    for a, b in pairwise(run):
        stops = (a in _STOP_CHARS) + (b in _STOP_CHARS)
        if stops < 2:
            yield a + b, _WEAK if stops else _STRONG


def query_terms(text: str) -> dict[str, int]:
    """Weighted terms of a query: words, CJK bigrams (a lone CJK character as itself)."""
    terms: dict[str, int] = {}
    for run in _RUNS.findall(normalise_content(text)):
        if _CJK.match(run):
            pairs = list(_bigrams(run)) if len(run) > 1 else [(run, _STRONG)]
            for term, weight in pairs:
                if term not in _STOP_CHARS:
                    terms[term] = max(weight, terms.get(term, 0))
        else:
            word = _stem(run)
            if len(word) > 1 and word not in _STOPWORDS:
                terms[word] = _STRONG
    return terms


def document_terms(text: str) -> frozenset[str]:
    """Terms of a memory: words, CJK bigrams and single CJK characters."""
    # The runs of `_RUNS` in the canonical form, found faster (every memory is projected
    # through here): CJK runs and word runs apart, as the two classes are disjoint; and on
    # ASCII text, where the canonical form only lowers the case, collapses whitespace and
    # strips trailing punctuation, the runs of letters and digits of the lowered text. Text
    # of ASCII, ideographs and common CJK punctuation (most Chinese memories) is as cheap:
    # the punctuation only separates runs, before and after NFKC, and the one change of the
    # canonical form that joins runs is dropping the whitespace between two ideographs.
    if text.isascii():
        words, runs = _ASCII_WORDS.findall(text.lower()), []
    elif _PLAIN_CJK.fullmatch(text):
        lowered = _IDEOGRAPH_GAPS.sub("", text.lower())
        words, runs = _ASCII_WORDS.findall(lowered), _CJK_RUNS.findall(lowered)
    else:
        normal = normalise_content(text)
        words, runs = _WORDS.findall(normal), _CJK_RUNS.findall(normal)
    terms = {_stem(word) if word[-1] == "s" else word for word in words}  # see _stem
    for run in runs:
        terms.update(run)
        terms.update(map(add, run, run[1:]))  # bigrams
    return frozenset(terms)


def index_terms(memory_key: str, content: str) -> list[str]:
    """What the ranker matches a memory on (sorted): the terms of its key's words and content.

    The search_terms projection stores these, so ranking need not re-tokenise each memory.
    """
    return sorted(document_terms(f"{memory_key.replace('_', ' ')} {content}"))


def named_categories(query: str) -> frozenset[str]:
    """The categories a query names ("my preferences"; stop words count here)."""
    said = document_terms(query)
    return frozenset(category for category, words in CATEGORY_WORDS.items() if words & said)


def key_terms(memory_key: str) -> list[str]:
    """The terms of a key's words alone (sorted): what "key coverage" counts."""
    return sorted(document_terms(memory_key.replace("_", " ")))


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


# -- the lexical ranker ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """A query as the lexical ranker reads it, and the ranker's judgement of one candidate."""

    terms: Mapping[str, int]
    phrase: str
    key: str
    named: frozenset[str]
    total: int

    @classmethod
    def of(cls, query: str) -> LexicalQuery:
        """Weighted terms, the phrase (none without terms), key form and named categories."""
        terms = query_terms(query)
        return cls(
            terms,
            normalise_content(query) if terms else "",
            normalise_key(query),
            named_categories(query),
            sum(terms.values()),
        )

    def matched(self, found: frozenset[str]) -> int:
        """The weight of the query terms among `found`."""
        return sum(w for t, w in self.terms.items() if t in found)

    def judge(
        self, c: Candidate, now: datetime, *, phrased: bool | None = None
    ) -> tuple[bool, tuple[Any, ...], float]:
        """Whether `c` matches, its sort key (best first) and its score.

        `phrased` overrides the phrase test (for a bound on rows not seen). Coverage compares as
        matched weight: the total is the same for every candidate of a query.
        """
        key_text = c.memory_key.replace("_", " ")
        found = c.terms if c.terms is not None else document_terms(f"{key_text} {c.content}")
        matched = self.matched(found)
        in_key = c.key_terms if c.key_terms is not None else document_terms(key_text)
        key_matched = self.matched(in_key)
        key_match = bool(self.key) and self.key == c.memory_key
        if phrased is None:
            phrased = has_phrase(self.phrase, c.memory_key, c.content)
        category = c.category in self.named
        order = (
            not key_match,
            not phrased,
            -matched,
            -key_matched,
            not category,
            c.is_due_for_review(now),
            -c.updated_at.timestamp(),
            str(c.memory_id),
        )
        coverage = matched / self.total if self.total else 0.0
        return (
            key_match or phrased or category or matched >= MIN_MATCHED,
            order,
            8 * key_match + 4 * phrased + 2 * coverage + category,
        )


class LexicalRanker:
    """Deterministic lexical ranking (section 10, first version); see the module docstring."""

    version = "lexical-2"

    def rank(self, query: str, candidates: Sequence[Candidate], *, now: datetime) -> list[Scored]:
        """Matches only, best first."""
        q = LexicalQuery.of(query)
        ranked: list[tuple[tuple[Any, ...], Scored]] = []
        for c in candidates:
            match, order, score = q.judge(c, now)
            if match:
                ranked.append((order, Scored(c, score)))
        ranked.sort(key=lambda pair: pair[0])
        return [scored for _, scored in ranked]


# -- the pipeline ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchItem:
    """A returned memory: its content (perhaps cut) and that content's token estimate."""

    candidate: Candidate
    content: str
    tokens: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What search returns, with the sum of the items' tokens."""

    items: list[SearchItem]
    total_tokens: int


def shadow_global(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Drop each global memory whose key a workspace memory among `candidates` also holds."""
    pool = list(candidates)
    overridden = {c.memory_key for c in pool if c.scope_type == "workspace"}
    return [c for c in pool if c.scope_type == "workspace" or c.memory_key not in overridden]


def _budget(ranked: Sequence[Scored], limit: int, total: int, per_item: int) -> SearchResult:
    items: list[SearchItem] = []
    used = 0
    for scored in ranked:
        if len(items) == limit:
            break
        cap = min(per_item, total - used)
        content = scored.candidate.content
        if estimate_tokens(content) > cap:
            if cap < MIN_CUT_TOKENS:
                break  # keep rank order: nothing below a left-out item is returned
            content = truncate(content, cap)
        tokens = estimate_tokens(content)
        items.append(SearchItem(scored.candidate, content, tokens))
        used += tokens
    return SearchResult(items, used)


def search(
    candidates: Iterable[Candidate],
    query: str,
    *,
    workspace: str,
    now: datetime,
    category: str | None = None,
    limit: int = DEFAULT_LIMIT,
    ranker: Ranker | None = None,
    total_tokens: int = TOTAL_TOKENS,
    item_tokens: int = ITEM_TOKENS,
) -> SearchResult:
    """Retrievable, visible candidates ranked for `query`, within the limit and budgets."""
    pool = [
        c
        for c in candidates
        if c.is_retrievable(now) and is_visible(c.scope_type, c.workspace_type, workspace)
    ]
    pool = [c for c in shadow_global(pool) if category is None or c.category == category]
    ranked = (ranker or LexicalRanker()).rank(query, pool, now=now)
    return _budget(ranked, max(0, min(limit, MAX_LIMIT)), total_tokens, item_tokens)
