"""KeywordGate: one scan that never misses a keyword, even when occurrences overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.model.sensitive import KeywordGate

WORDS = ("pw", "pwd", "pass", "otp", "pin", "token", "ken", "code", "密码", "码")


def present(text: str) -> set[str]:
    return {word for word in WORDS if word in text}


def test_a_text_without_keywords_opens_nothing() -> None:
    assert KeywordGate(WORDS).possible("I prefer examples before definitions") == frozenset()


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("pwd: x", "pw"),  # a prefix of the keyword the scan reports
        ("otpin 1234", "pin"),  # starts inside the reported keyword and runs past it
        ("mytoken", "ken"),  # lies wholly inside it
        ("支付密码", "码"),
    ],
)
def test_a_keyword_hidden_by_an_overlapping_one_is_still_possible(text: str, hidden: str) -> None:
    assert hidden in KeywordGate(WORDS).possible(text)


@settings(max_examples=400, database=None, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, "p", "w", "d", "o", "t", "x", " ", "密"]), max_size=12))
def test_every_keyword_in_the_text_is_possible(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert present(text) <= KeywordGate(WORDS).possible(text)


def test_an_empty_keyword_is_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        KeywordGate(["pw", ""])
