"""Text rules: the canonical form for comparisons, memory keys and the stored form."""

# The cases are full-width and CJK text on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.model.values import (
    KEY_MAX_CHARS,
    clean_content,
    is_valid_key,
    normalise_content,
    normalise_key,
)

# Mixed scripts, full-width forms, CJK punctuation and odd whitespace, so shrinking finds the
# interesting cases rather than only ASCII ones.
_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(
            [
                *"我喜欢例子。，、！？；：“”‘’「」 \u3000\t\n\r ＡＢｃ１２Straßeǅﬁ.;!?-_ ",
                *["\u200b", "\u00ad", "\ufeff", "\u0301", "\u0130", "\u1e9e", "\ud800", "\x00"],
            ]
        ),
    ),
    max_size=60,
)
_PROPERTY = settings(max_examples=400, database=None, deadline=None)


# normalise_content ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我更喜欢先看例子再看定义。", "我更喜欢先看例子再看定义"),
        ("回复代码时优先使用 Python。", "回复代码时优先使用python"),
        ("I prefer examples before definitions.", "i prefer examples before definitions"),
        ("  I  PREFER\texamples\n before definitions!! ", "i prefer examples before definitions"),
        ("ＡＢＣ，你好！", "abc,你好"),
        ("你好 ， 世界", "你好,世界"),
        ("他说“你好”", '他说"你好"'),
        ("列表、元组", "列表,元组"),
        ("Straße", "strasse"),
        ("ok...", "ok"),
        ("done?!；", "done"),
        ("。。。", ""),
        ("", ""),
        ("a\u200bb", "ab"),
        ("e.g. use Python 3.11 first.", "e.g. use python 3.11 first"),
    ],
)
def test_normalise_content_gives_the_canonical_form(text: str, expected: str) -> None:
    assert normalise_content(text) == expected


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("我更喜欢先看例子再看定义。", "我更喜欢先看例子再看定义"),
        ("我更喜欢 先看例子 再看定义", "我更喜欢先看例子再看定义。"),
        ("回复代码时优先使用 Python。", "回复代码时优先使用Python"),
        ("回复代码时，优先使用Python", "回复代码时, 优先使用 python."),
        ("I prefer examples before definitions", "i prefer  examples before definitions."),
        ("I prefer examples before definitions!", "I PREFER EXAMPLES BEFORE DEFINITIONS"),
        ("工作日每天只能学习一小时", "工作日每天只能学习一小时！"),
        ("Use APA citation style", "Ｕｓｅ ＡＰＡ citation style"),
        ("学习时间：晚上", "学习时间:晚上"),
        ("每天学习 1 小时", "每天学习1小时"),
        ("line one\nline two", "line one line two"),
    ],
)
def test_normalise_content_treats_variants_as_the_same_content(left: str, right: str) -> None:
    assert normalise_content(left) == normalise_content(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("回复代码时优先使用 Python", "回复代码时优先使用 Java"),
        ("我喜欢先看例子", "我不喜欢先看例子"),
        ("I prefer examples before definitions", "I prefer definitions before examples"),
        ("每天学习 1 小时", "每天学习 2 小时"),
        ("저는 예제를 좋아합니다", "저는예제를좋아합니다"),
        ("Is it ready?", "It is ready"),
        ("a-b", "ab"),
    ],
)
def test_normalise_content_keeps_different_contents_apart(left: str, right: str) -> None:
    assert normalise_content(left) != normalise_content(right)


@_PROPERTY
@given(_TEXT)
def test_normalise_content_is_idempotent(text: str) -> None:
    once = normalise_content(text)
    assert normalise_content(once) == once


@_PROPERTY
@given(_TEXT)
def test_normalise_content_has_no_edge_whitespace_or_trailing_full_stop(text: str) -> None:
    result = normalise_content(text)
    assert result == result.strip()
    assert not result.endswith((".", "!", "?", ";", "。"))


# normalise_key / is_valid_key ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("explanation_preference", "explanation_preference"),
        ("Explanation Preference", "explanation_preference"),
        ("preferred-language", "preferred_language"),
        ("preferred.language", "preferred_language"),
        ("  Preferred   Language  ", "preferred_language"),
        ("学习时间", "学习时间"),
        ("学习 时间", "学习_时间"),
        ("ＰＲＥＦＥＲＲＥＤ＿ＬＡＮＧＵＡＧＥ", "preferred_language"),
        ("__a__b--c..d__", "a_b_c_d"),
        ("Straße", "strasse"),
        ("a\u200bb", "ab"),
        ("key!", "key!"),
        ("---", ""),
    ],
)
def test_normalise_key_gives_the_canonical_key(key: str, expected: str) -> None:
    assert normalise_key(key) == expected


@pytest.mark.parametrize(
    "key",
    [
        "explanation_preference",
        "preferred_language",
        "学习时间",
        "goal_2025",
        "a",
        "x" * KEY_MAX_CHARS,
        "язык_ответа",
        "भाषा",
        "日本語_ok",
    ],
)
def test_is_valid_key_accepts_canonical_keys(key: str) -> None:
    assert is_valid_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "x" * (KEY_MAX_CHARS + 1),
        "Preferred_Language",
        "_leading",
        "trailing_",
        "double__underscore",
        "with space",
        "with-hyphen",
        "key!",
        "emoji_😀",
        "path/like",
        "\u0301accent_first",
    ],
)
def test_is_valid_key_refuses_anything_else(key: str) -> None:
    assert not is_valid_key(key)


@pytest.mark.parametrize("key", ["Explanation Preference", "学习 时间", "Goal-2025", "ａｂｃ"])
def test_normalised_keys_are_valid(key: str) -> None:
    assert is_valid_key(normalise_key(key))


@_PROPERTY
@given(_TEXT)
def test_normalise_key_is_idempotent(key: str) -> None:
    once = normalise_key(key)
    assert normalise_key(once) == once


@_PROPERTY
@given(_TEXT)
def test_a_valid_key_is_its_own_normal_form(key: str) -> None:
    if is_valid_key(key):
        assert normalise_key(key) == key


# clean_content -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  我更喜欢先看例子再看定义。  ", "我更喜欢先看例子再看定义。"),
        ("line one\r\nline two\rline three", "line one\nline two\nline three"),
        ("para one\n\n\n\n\npara two", "para one\n\npara two"),
        ("para one\n \n\t\n  \npara two", "para one\n\npara two"),
        ("para one\n\npara two", "para one\n\npara two"),
        ("trailing   \nspaces\t", "trailing\nspaces"),
        ("  indented\n  kept", "indented\n  kept"),
        ("e\u0301", "\u00e9"),
        ("ＡＢＣ，你好！", "ＡＢＣ，你好！"),
        ("ﬁne", "ﬁne"),
        ("nul\x00byte", "nulbyte"),
        ("\ufeffBOM kept", "\ufeffBOM kept"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_clean_content_gives_the_stored_form(text: str, expected: str) -> None:
    assert clean_content(text) == expected


def test_clean_content_keeps_case_and_punctuation() -> None:
    text = "I PREFER Examples before definitions!!"
    assert clean_content(text) == text


@_PROPERTY
@given(_TEXT)
def test_clean_content_is_idempotent(text: str) -> None:
    once = clean_content(text)
    assert clean_content(once) == once


@_PROPERTY
@given(_TEXT)
def test_clean_content_is_always_storable_utf8(text: str) -> None:
    cleaned = clean_content(text)
    cleaned.encode("utf-8")
    assert "\x00" not in cleaned
    assert "\r" not in cleaned
    assert "\n\n\n" not in cleaned


_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=80)


@_PROPERTY
@given(_ASCII)
def test_one_pass_normalises_ascii_content_for_good(text: str) -> None:
    once = normalise_content(text)
    assert once.isascii()
    assert normalise_content(once) == once


@_PROPERTY
@given(_ASCII)
def test_one_pass_normalises_an_ascii_key_for_good(key: str) -> None:
    once = normalise_key(key)
    assert once.isascii()
    assert normalise_key(once) == once
