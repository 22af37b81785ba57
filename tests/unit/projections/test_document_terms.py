"""`document_terms` finds the same terms as the plain definition, on any text.

Every memory is projected through it, so it takes shortcuts (ASCII text without the full
canonical form, CJK and word runs found apart); the definition it must agree with is here.
"""

# The fragments have full-width and CJK punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

from itertools import pairwise

from hypothesis import example, given, settings
from hypothesis import strategies as st

from domain.model.text import normalise_content
from projections import search
from projections.search import document_terms, index_terms, key_terms


def defined_terms(text: str) -> frozenset[str]:
    """The definition: `_RUNS` over the canonical form, bigrams and characters of CJK runs."""
    terms: set[str] = set()
    for run in search._RUNS.findall(normalise_content(text)):
        if search._CJK.match(run):
            terms.update(a + b for a, b in pairwise(run))
            terms.update(run)
        else:
            terms.add(search._stem(run))
    return frozenset(terms)


_FRAGMENTS = (
    "I prefer", "Examples", "STUDIES", "classes", "bus", "is", "ss", "s", "x1", "_", "-", "'",
    "学习", "例子", "再", "定义", "的", "。", "，", "：", "、", " ", "  ", "\t", "\n", "\u3000",
    "Ｐｙｔｈｏｎ", "１２３", "ｓ", "\u00ad", "\u200b", "\ufeff", "ß", "Straße", "İ", "ﬁ", "Σσς",
    "ｶﾀｶﾅ", "カタカナ", "ㄅㄆ", "豈", "\U00020000", "한국어", "é", "e\u0301", "½", "²", "…",
    "“quoted”", "【x】", "—", ".", "!", "?", ";", "🙂", "٣", "ǅ",
)  # fmt: skip


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
