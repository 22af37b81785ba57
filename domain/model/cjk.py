"""Which characters are CJK: the one definition the canonical form, the tokeniser and retrieval use.

CJK letters are the scripts written without spaces between words: Han (the unified ideographs
with their extensions and the compatibility ideographs), kana (with the phonetic extensions),
bopomofo, and the iteration and number marks U+3005 and U+3007. Hangul is not here: Korean separates
words with spaces. CJK marks are the radicals, strokes, symbols and punctuation of those
scripts: not letters, but a space beside them carries no meaning either.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CJK_LETTER", "CJK_LETTERS", "CJK_TEXT", "is_cjk"]

CJK_LETTERS: Final = (
    "\u3005\u3007\u3040-\u30fa\u30fc-\u30ff\u3100-\u312f\u31a0-\u31bf\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)
"""Ranges of CJK letters, for a regular expression's character class."""
CJK_TEXT: Final = CJK_LETTERS + "\u2e80-\u2fdf\u3001-\u303f\u30fb\u31c0-\u31ef"
"""Ranges of CJK letters and marks (radicals, strokes, symbols and punctuation)."""
CJK_LETTER: Final = re.compile(f"[{CJK_LETTERS}]")
"""One CJK letter (`CJK_LETTER.match(char)`; `search` finds one in a text)."""


def is_cjk(text: str) -> bool:
    """True when `text` holds any CJK letter (Chinese or Japanese script)."""
    return CJK_LETTER.search(text) is not None
