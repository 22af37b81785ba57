"""Which characters are CJK: one definition for the canonical form, the tokeniser and retrieval."""

# The cases are CJK and full-width text on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import re

import pytest

from domain.model.cjk import CJK_LETTER, CJK_TEXT, is_cjk
from domain.model.values import normalise_content

_MARK = re.compile(f"[{CJK_TEXT}]")


@pytest.mark.parametrize(
    "char",
    [
        "学",  # unified ideographs
        "㐀",  # extension A
        "\U00020000",  # extension B
        "\U00031340",  # extension G
        "豈",  # compatibility ideographs
        "あ",  # hiragana
        "カ",  # katakana
        "ー",  # the prolonged sound mark
        "ㇰ",  # katakana phonetic extensions
        "ㄅ",  # bopomofo
        "ㆠ",  # bopomofo extended
        "々",  # iteration mark
        "〇",  # ideographic number zero
    ],
)
def test_letters_of_scripts_written_without_spaces_are_cjk(char: str) -> None:
    assert CJK_LETTER.match(char)
    assert _MARK.match(char)
    assert is_cjk(f"abc {char}")


@pytest.mark.parametrize("char", ["。", "、", "「", "〔", "・", "⺀", "㇀"])
def test_cjk_punctuation_radicals_and_strokes_are_marks_not_letters(char: str) -> None:
    assert not CJK_LETTER.match(char)
    assert _MARK.match(char)


@pytest.mark.parametrize("char", ["a", "é", "я", "한", "1", "_", " ", "!"])
def test_other_scripts_hangul_and_ascii_are_not_cjk(char: str) -> None:
    assert not _MARK.match(char)
    assert not is_cjk(char)


def test_a_space_beside_cjk_letters_or_marks_carries_no_meaning() -> None:
    assert normalise_content("使用 Python") == normalise_content("使用Python")
    assert normalise_content("例子 ,也") == normalise_content("例子,也")
    assert normalise_content("한국어 단어") == "한국어 단어"
