"""Text rules for memories: the stored form, the canonical form for comparisons, and keys."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = [
    "KEY_MAX_CHARS",
    "clean_content",
    "is_valid_key",
    "normalise_content",
    "normalise_key",
]

KEY_MAX_CHARS: Final = 64

# Han (incl. extensions and compatibility ideographs), kana, bopomofo, CJK symbols and punctuation.
# Hangul is left out on purpose: Korean separates words with spaces.
_CJK: Final = (
    "\u2e80-\u2fdf\u3001-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)
_INVISIBLE: Final = re.compile("[\u00ad\u200b\u2060\ufeff]")
_WHITESPACE: Final = re.compile(r"\s+")
# CJK text is written without spaces, so a space next to a CJK character carries no meaning:
# "使用 Python" and "使用Python", "例子 ,也" and "例子,也" are the same content.
_SPACE_BY_CJK: Final = re.compile(f"(?<=[{_CJK}]) | (?=[{_CJK}])")
_TRAILING: Final = " .!?;\u3002"
# CJK punctuation and dashes that NFKC leaves alone, mapped to the ASCII variants (escaped here
# because several are visually confusable with ASCII).
_PUNCT_MAP: Final = str.maketrans(
    {
        "\u3002": ".",  # ideographic full stop
        "\u3001": ",",  # ideographic comma
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u300c": '"',
        "\u300d": '"',
        "\u300e": '"',
        "\u300f": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u3010": "[",
        "\u3011": "]",
        "\u3014": "(",
        "\u3015": ")",
        "\u2010": "-",
        "\u2011": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
    }
)

_KEY_SEPARATORS: Final = re.compile(r"[\s\-.\u2010-\u2015\u2212\u30fb\u00b7]+")
_UNDERSCORES: Final = re.compile(r"_+")

_NEWLINES: Final = re.compile("\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# C0/C1 controls other than tab and newline, and lone surrogates: invisible or unstorable.
_UNSTORABLE: Final = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff]")
_TRAILING_SPACE: Final = re.compile(r"[^\S\n]+$", re.MULTILINE)
_BLANK_RUN: Final = re.compile(r"\n{3,}")

# NFKC and casefold do not commute for a handful of code points; a few passes reach a fixed point.
_MAX_PASSES: Final = 4


def normalise_content(text: str) -> str:
    """Return the canonical form used to decide whether two contents are the same."""
    if text.isascii():  # NFKC and casefold change no ASCII text: one pass is the fixed point
        return _normalise_content_once(text)
    current = text
    for _ in range(_MAX_PASSES):
        following = _normalise_content_once(current)
        if following == current:
            break
        current = following
    return current


def _normalise_content_once(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = unicodedata.normalize("NFKC", folded).translate(_PUNCT_MAP)
    folded = _INVISIBLE.sub("", folded)
    folded = _WHITESPACE.sub(" ", folded).strip()
    folded = _SPACE_BY_CJK.sub("", folded)
    return folded.rstrip(_TRAILING)


def normalise_key(key: str) -> str:
    """Return the canonical memory key; check the result with `is_valid_key`."""
    if key.isascii():  # NFKC and casefold change no ASCII text: one pass is the fixed point
        return _normalise_key_once(key)
    current = key
    for _ in range(_MAX_PASSES):
        following = _normalise_key_once(current)
        if following == current:
            break
        current = following
    return current


def _normalise_key_once(key: str) -> str:
    folded = unicodedata.normalize("NFKC", key).casefold()
    folded = _INVISIBLE.sub("", unicodedata.normalize("NFKC", folded)).strip()
    folded = _KEY_SEPARATORS.sub("_", folded)
    return _UNDERSCORES.sub("_", folded).strip("_")


def is_valid_key(normalised: str) -> bool:
    """True for a canonical key of 1..64 letters (any script), digits and single inner `_`."""
    if not 1 <= len(normalised) <= KEY_MAX_CHARS or normalise_key(normalised) != normalised:
        return False
    for index, char in enumerate(normalised):
        if char == "_":
            continue
        category = unicodedata.category(char)
        if category[0] == "L" or category == "Nd":
            continue
        # Combining marks belong to the letter before them (Devanagari, Thai, ...).
        if category in ("Mn", "Mc") and index > 0 and normalised[index - 1] != "_":
            continue
        return False
    return True


def clean_content(text: str) -> str:
    """Return the form to store: NFC, `\\n` newlines, no trailing spaces, at most one blank line."""
    cleaned = _NEWLINES.sub("\n", text)
    cleaned = _UNSTORABLE.sub("", cleaned)
    cleaned = unicodedata.normalize("NFC", cleaned)
    cleaned = _TRAILING_SPACE.sub("", cleaned)
    cleaned = _BLANK_RUN.sub("\n\n", cleaned)
    return cleaned.strip()
