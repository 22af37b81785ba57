"""`document_terms` finds the same terms as the plain definition, on any text.

Every memory is projected through it, so it takes shortcuts (ASCII text without the full
canonical form, CJK and word runs found apart); the definition it must agree with is here.
"""

# The fragments have full-width and CJK punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from domain.model.values import normalise_content
from projections import tokens as search
from projections.tokens import document_terms, index_terms, key_terms


def defined_terms(text: str) -> frozenset[str]:
    """The definition: `_RUNS` over the canonical form, bigrams and characters of CJK runs."""
    terms: set[str] = set()
    for run in search._RUNS.findall(normalise_content(text)):
        if search.CJK_LETTER.match(run):
            terms.update(a + b for a, b in pairwise(run))
            terms.update(run)
        else:
            terms.add(search.stem(run))
    return frozenset(terms)


_FRAGMENTS = (
    "I prefer", "Examples", "STUDIES", "classes", "bus", "is", "ss", "s", "x1", "_", "-", "'",
    "学习", "例子", "再", "定义", "的", "。", "，", "：", "、", " ", "  ", "\t", "\n", "\u3000",
    "Ｐｙｔｈｏｎ", "１２３", "ｓ", "\u00ad", "\u200b", "\ufeff", "ß", "Straße", "İ", "ﬁ", "Σσς",
    "ｶﾀｶﾅ", "カタカナ", "ㄅㄆ", "豈", "\U00020000", "한국어", "é", "e\u0301", "½", "²", "…",
    "“quoted”", "【x】", "—", ".", "!", "?", ";", "🙂", "٣", "ǅ", "学 习", "学\u3000习", "《书》",
    "…", "～", "·", "、", "\x1c", "\x85", "\u2028", "﹐", "〈", "「", "』",
)  # fmt: skip
_PLAIN_CJK = st.text(
    st.one_of(
        st.characters(max_codepoint=127),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
        st.sampled_from(search._CJK_PUNCTUATION),
    ),
    max_size=40,
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=16).map("".join))
@example("Also: no emoji, British spelling, and cite sources when you can. (#1-2)")
@example("学习方式 1 2 学习Rust时我更喜欢先看例子，再看定义。")
def test_terms_of_mixed_text_are_the_defined_ones(text: str) -> None:
    assert document_terms(text) == defined_terms(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_terms_of_ascii_text_are_the_defined_ones(text: str) -> None:
    assert document_terms(text) == defined_terms(text)


@settings(max_examples=1000, deadline=None)
@given(_PLAIN_CJK)
@example("学 \t习，再\u3000看 定义。 Python 3 学")
def test_terms_of_ascii_and_cjk_text_are_the_defined_ones(text: str) -> None:
    assert search._PLAIN_CJK.fullmatch(text)  # the shortcut is what is tested here
    assert document_terms(text) == defined_terms(text)


@pytest.mark.parametrize("mark", search._CJK_PUNCTUATION)
def test_cjk_punctuation_only_separates_runs(mark: str) -> None:
    parted = ["学习"] if mark.isspace() else ["学", "习"]
    assert search._RUNS.findall(normalise_content(f"学{mark}习")) == parted
    assert search._RUNS.findall(normalise_content(f"a{mark}b")) == ["a", "b"]


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_terms_of_any_text_are_the_defined_ones(text: str) -> None:
    assert document_terms(text) == defined_terms(text)


def test_index_and_key_terms_are_sorted_document_terms() -> None:
    assert index_terms("exam_goal", "Passing 考研 exams") == sorted(
        defined_terms("exam goal Passing 考研 exams")
    )
    assert key_terms("学习_style") == sorted(defined_terms("学习 style"))
    assert index_terms("studies", "") == ["study"]
