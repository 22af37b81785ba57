"""The tokeniser: the terms of memories and queries, which is the search index's format.

The terms of a text are words, CJK bigrams and weights: `index_terms(memory_key, content)` is
what the search_terms view stores for a memory, and `query_terms(text)` what a query is matched
with (retrieval/query.py analyses a query once through it). Both read the canonical form of
`domain.model.values.normalise_content`; what a memory's text is (its key's words, then its
content) is `searchable_text`. The index and retrieval must split text alike, so both import
this module; a change to it changes the index format and needs
`memledger projections rebuild search_terms`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import pairwise
from operator import add
from typing import Final

from domain.model.cjk import CJK_LETTER, CJK_LETTERS
from domain.model.values import normalise_content

__all__ = [
    "NOT_PLURAL",
    "STOPWORDS",
    "STOP_CHARS",
    "STRONG",
    "document_terms",
    "index_terms",
    "key_terms",
    "key_words",
    "query_terms",
    "searchable_text",
    "stem",
    "word_char",
]


def word_char(char: str) -> bool:
    """A letter, digit or underscore of a script that separates words with spaces."""
    return (char.isalnum() or char == "_") and not CJK_LETTER.match(char)


_RUNS: Final = re.compile(f"[{CJK_LETTERS}]+|[^\\W_{CJK_LETTERS}]+")
_CJK_RUNS: Final = re.compile(f"[{CJK_LETTERS}]+")
_WORDS: Final = re.compile(f"[^\\W_{CJK_LETTERS}]+")
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
STOPWORDS: Final = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "for", "with", "at", "by",
    "from", "as", "into", "about", "is", "are", "was", "were", "be", "been", "am", "do", "does",
    "did", "have", "has", "had", "i", "me", "my", "mine", "myself", "you", "your", "we", "our",
    "us", "it", "its", "this", "that", "these", "those", "there", "here", "what", "which", "who",
    "whom", "whose", "how", "when", "where", "why", "should", "would", "could", "can", "will",
    "shall", "may", "might", "must", "please", "any", "some", "all", "not", "no", "yes", "than",
    "then", "so", "too", "very", "just", "also", "tell", "know", "remember", "recall",
))
"""English words that alone say nothing (never a query term)."""
# fmt: on
# Function characters: alone they say nothing, and a bigram of two of them (我的, 什么) neither.
STOP_CHARS: Final = frozenset(
    "的了是我你他她它们在和与及也都就很吗呢吧啊呀么这那个一有要会对把被给让什怎样哪些为之其"
)
"""Chinese function characters (alone, or two of them, never a query term)."""
STRONG: Final = 2
"""The weight of a word or a bigram of two content characters."""
_WEAK: Final = 1  # a bigram with one function character counts half


NOT_PLURAL: Final = ("ss", "us", "is")
"""Endings of English words whose final s is no plural (class, status, analysis)."""


def stem(word: str) -> str:
    """Plural folding only, applied alike to queries and memories ("examples" ~ "example").

    The index's term form: the search_terms view stores it, so a change needs a rebuild. The
    glossary (retrieval/glossary.py `fold`) folds further, into its own space of dictionary
    gloss terms (-ing, -ed, -ation, British -ise), computed on each search and never stored;
    the two are deliberately different (the index matches words exactly, the glossary
    concepts loosely) and share only `NOT_PLURAL`."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(NOT_PLURAL):
        return word[:-1]
    return word


def _bigrams(run: str) -> Iterable[tuple[str, int]]:
    for a, b in pairwise(run):
        stops = (a in STOP_CHARS) + (b in STOP_CHARS)
        if stops < 2:
            yield a + b, _WEAK if stops else STRONG


def query_terms(text: str, *, normal: bool = False) -> dict[str, int]:
    """Weighted terms of a query: words, CJK bigrams (a lone CJK character as itself).

    `normal`: `text` is already `normalise_content`'s form (retrieval.query.Query passes it).
    """
    terms: dict[str, int] = {}
    for run in _RUNS.findall(text if normal else normalise_content(text)):
        if CJK_LETTER.match(run):
            pairs = list(_bigrams(run)) if len(run) > 1 else [(run, STRONG)]
            for term, weight in pairs:
                if term not in STOP_CHARS:
                    terms[term] = max(weight, terms.get(term, 0))
        else:
            word = stem(run)
            if len(word) > 1 and word not in STOPWORDS:
                terms[word] = STRONG
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
    terms = {stem(word) if word[-1] == "s" else word for word in words}  # see stem
    for run in runs:
        terms.update(run)
        terms.update(map(add, run, run[1:]))  # bigrams
    return frozenset(terms)


def index_terms(memory_key: str, content: str) -> list[str]:
    """What the ranker matches a memory on (sorted): the terms of its key's words and content.

    The search_terms projection stores these, so ranking need not re-tokenise each memory.
    """
    return sorted(document_terms(searchable_text(memory_key, content)))


def key_terms(memory_key: str) -> list[str]:
    """The terms of a key's words alone (sorted): what "key coverage" counts."""
    return sorted(document_terms(searchable_text(memory_key)))


def key_words(memory_key: str) -> str:
    """A memory key as words: "study_plan" -> "study plan"."""
    return memory_key.replace("_", " ")


def searchable_text(memory_key: str, content: str | None = None) -> str:
    """The text a memory is searched by: its key's words, then its content."""
    words = key_words(memory_key)
    return words if content is None else f"{words} {content}"
