"""English words as the glossary compares them: content words of Latin-script text, stop
words (the search index's and those of dictionary glosses) out, each folded to one form by a
light stemmer (plurals, -ing/-ed/-ation, -ment, -ly, British -ise and -our). Used for both
sides of retrieval/glossary.py: a memory's own English words, a query's, and the glosses of
CC-CEDICT."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from projections.tokens import NOT_PLURAL, STOPWORDS

__all__ = ["english_terms", "fold", "words"]

_LATIN_WORD: Final = re.compile("[a-z][a-z'-]*")
# fmt: off
_GLOSS_STOPWORDS: Final = frozenset((
    "sb", "sth", "one's", "oneself", "someone", "something", "etc", "lit", "fig", "used", "esp",
    "also", "abbr", "variant", "see", "cl", "old", "coll", "dialect", "surname", "kangxi",
    "radical", "pr", "i.e", "e.g", "form", "of", "person", "thing", "to", "be", "make", "get",
    "have", "do", "one", "use", "need", "many", "much", "per", "anything", "anywhere", "nowhere",
    "everything", "everywhere", "somewhat", "somewhere", "whatever", "whichever", "whatsoever",
    "whoever", "wherever", "whenever", "however", "yourself", "herself", "himself", "itself",
    "themselves", "ourselves", "things", "kind", "sort", "way",
))
"""Words of dictionary glosses that translate nothing (CC-CEDICT's notation, pronouns)."""
# fmt: on
_STOP: Final = STOPWORDS | _GLOSS_STOPWORDS
_BRITISH: Final = re.compile(r"(?<=.{3})is(e|ed|es|ing|ation|ations)$")
_SUFFIXES: Final = (
    ("ational", "ate"),
    ("ations", ""),
    ("ation", ""),
    ("ments", ""),
    ("ment", ""),
    ("ings", ""),
    ("ing", ""),
    ("ied", "y"),
    ("ies", "y"),
    ("ed", ""),
    ("es", ""),
    ("s", ""),
    ("ly", ""),
)


def fold(word: str) -> str:
    """One form for an English word's variants: memorise/memorized -> memoriz, studies -> study.

    The glossary's concept space, looser than the search index's `projections.tokens.stem`
    (plurals only, stored by the index): "examples" is "exampl" here, "example" there."""
    word = _BRITISH.sub(r"iz\1", word)
    if word.endswith("our") and len(word) > 5:
        word = word[:-3] + "or"
    for suffix, replacement in _SUFFIXES:
        if (
            word.endswith(suffix)
            and len(word) - len(suffix) >= 3
            and not (suffix == "s" and word.endswith(NOT_PLURAL))
            and not (suffix == "ly" and word.endswith(("ply", "ily")))  # apply, family
        ):
            word = word[: -len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2] not in "slz":
                word = word[:-1]  # planning -> plan
            break
    if len(word) > 4 and word.endswith("e"):
        word = word[:-1]
    return word


def english_terms(text: str, folded: Mapping[str, str] | None = None) -> frozenset[str]:
    """The folded content words of `text`'s Latin script (hyphenated words split).

    `folded`: words already folded (the dictionary's, `Glossary.folded`); others are folded here.
    """
    known = folded or {}
    return frozenset(known.get(word) or fold(word) for word in words(text))


def words(text: str) -> list[str]:
    """The content words of `text`'s Latin script, lower case, not yet folded."""
    found: list[str] = []
    for word in _LATIN_WORD.findall(text.lower()):
        word = word.strip("'-").removesuffix("'s")
        found += (part for part in word.split("-") if len(part) > 1 and part not in _STOP)
    return found
