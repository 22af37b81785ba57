"""The needles declared beside each profile rule's patterns are implied by the patterns.

A rule is skipped when the content holds none of a pattern's needles, so every string the
pattern matches must hold one: checked on strings generated from each pattern and on the texts
of the rule tests. That skipping never changes a result is
tests/projections/test_projection_batches.py's test_rule_prefilters_never_change_what_is_derived.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.model.values import normalise_content
from projections.views import profile_rules
from projections.views.profile_rules import Needles, Rule
from tests.projections.test_profile_rules import DERIVED, NOTHING

_DECLARED = [(rule, needles) for rule in profile_rules.RULES for needles in rule.needs]
_IDS = [
    f"{n}-{rule.name}-{i}"
    for n, rule in enumerate(profile_rules.RULES)
    for i, _ in enumerate(rule.needs)
]


def test_every_rule_but_the_exact_key_declares_needles() -> None:
    without = [rule.name for rule in profile_rules.RULES if not rule.needs]

    assert without == ["exact_key"]
    assert all(needles.strings and all(needles.strings) for _, needles in _DECLARED)


@pytest.mark.parametrize("pair", _DECLARED, ids=_IDS)
def test_every_string_a_pattern_matches_holds_one_of_its_needles(
    pair: tuple[Rule, Needles],
) -> None:
    _, needles = pair

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.from_regex(needles.pattern))
    def check(text: str) -> None:
        assert needles.found.search(text), text

    check()


@pytest.mark.parametrize("pair", _DECLARED, ids=_IDS)
def test_every_rule_test_text_a_pattern_matches_holds_one_of_its_needles(
    pair: tuple[Rule, Needles],
) -> None:
    _, needles = pair
    texts = [normalise_content(content) for content, *_ in [*DERIVED, *NOTHING]]
    matched = [text for text in texts if needles.pattern.search(text)]

    assert [text for text in matched if not needles.found.search(text)] == []


def test_a_needle_is_a_literal_string() -> None:
    needles = Needles(re.compile(r"a\.b|c+"), ("a.b", "c+"))

    assert needles.found.search("a.b")
    assert not needles.found.search("axb ccc")
