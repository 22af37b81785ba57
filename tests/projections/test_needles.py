"""projections/views/needles.py: the strings every match of a pattern contains.

It reads the private `re._parser`; these tests are the pin. If a Python release changes the
parser's shape, `needles` turns into "no prefilter" (still correct, only slower) and the first
tests here fail, which is the signal to look.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from projections.views import profile_rules
from projections.views.needles import needles, needs


def _strings(pattern: re.Pattern[str] | None) -> set[str]:
    assert pattern is not None
    return {re.sub(r"\\(.)", r"\1", part) for part in pattern.pattern.split("|")}


def test_literals_alternatives_and_classes_give_their_strings() -> None:
    assert _strings(needles("python")) == {"python"}
    assert _strings(needles("例子|示例")) == {"例子", "示例"}
    assert _strings(needles(r"(?<![a-z])(?:rust|go)(?![a-z])")) == {"rust", "go"}
    assert _strings(needles("ab[cd]")) == {"abc", "abd"}
    assert _strings(needles(r"\d+ hours?")) == {" hour", " hours"}


def test_what_it_cannot_be_sure_of_gives_no_prefilter() -> None:
    assert needles(".*") is None
    assert needles("a?") is None
    assert needles(re.compile("python", re.IGNORECASE)) is None
    assert needles(r"[^a]") is None
    assert needs(".*", "x") == (re.compile("x"),)


def test_every_rule_of_the_profile_that_declares_needs_gets_them() -> None:
    with_needs = [rule for rule in profile_rules.RULES if rule.needs]

    assert len(with_needs) >= len(profile_rules.RULES) - 1  # the exact-key rule has none
    assert all(all(n.pattern for n in rule.needs) for rule in with_needs)


_ALPHABET = st.sampled_from(list("abcpython 例子示例小时hours0123"))
_PATTERNS = st.sampled_from(
    [r"python|rust", r"例子|示例", r"\d+ ?(?:hours?|小时)", r"(?:a|b)c(?:d|e)", r"p[yi]th?on"]
)


@given(_PATTERNS, st.lists(_ALPHABET, max_size=20).map("".join))
def test_a_text_without_any_needle_never_matches(pattern: str, text: str) -> None:
    found = needles(pattern)
    assert found is not None
    if re.search(pattern, text):
        assert found.search(text)
