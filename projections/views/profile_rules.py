"""Profile rules: the short, stable profile facts a memory states (design section 6).

Pure functions, no SQL: `derive(memory)` gives `{field: value}` by deterministic Chinese and
English keyword rules over `normalise_content(content)`, in this order of precedence:

- exact key: memory_key is a field name and the content a short (<= 40 chars) known value or
  synonym ("中文" -> zh); open fields (daily_study_time, major, exam_goal) keep a slug otherwise.
- explanation_preference: example_first / definition_first ("先看例子再理解定义").
- preferred_programming_language: python, rust, go, cpp, ... beside a liking ("我习惯用 Python").
- response_language: zh / en ("请用中文回答", "reply in English").
- citation_style: apa, mla, chicago, ieee, harvard, vancouver, gbt7714 beside a citation word.
- math_notation: minimal ("尽量少用公式", "less math notation") / formal ("严格的数学推导").
- daily_study_time: per day, weekdays or weekends, beside a study word ("工作日每天只能学习一小时"
  -> 1h_weekdays, "study 30 minutes a day" -> 30min_daily); clauses join: 1h_weekdays,3h_weekends.
- major: a known subject in a clause naming a major ("我的专业是计算机科学" -> computer_science).
- expertise_level: beginner / intermediate / advanced, said of oneself ("我是零基础").
- exam_goal: a known exam beside a goal word ("准备考研" -> postgraduate_entrance_exam).

Categories preference, profile, background and constraint feed every field; goal feeds only
exam_goal; fact, project and other feed nothing. Content over 200 characters (not short) or
redacted feeds nothing. One value per field and memory: the first rule, then first mention.

Limits: keywords per clause, not understanding. The liking rules skip clauses holding a
negation (不, 别, 没, not, never, avoid, ...): "I like Python but not Java" gives python, "不是
新手" nothing, yet "hardly ever use Java" gives java; homographs (swift, rust) can misfire;
unknown subjects and exams give nothing, not a guess. Changed rules reach old rows by a rebuild.
A rule that raises is logged (logger `projections.profile`, never the content) and yields
nothing; the other rules still run.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from domain.model.events import REDACTED
from domain.model.values import normalise_content
from projections.views.profile_words import (
    AIMING,
    AIMING_NEEDLES,
    CITATIONS,
    CITATIONS_NEEDLES,
    CITING,
    CITING_NEEDLES,
    DEF_NEEDLES,
    EX_NEEDLES,
    EXAMS,
    EXAMS_NEEDLES,
    EXPLANATION,
    FORMAL,
    FORMAL_NEEDLES,
    LANGUAGES,
    LEVELS,
    LEVELS_NEEDLES,
    LIKING,
    LIKING_NEEDLES,
    MAJORING,
    MAJORING_NEEDLES,
    MINIMAL,
    MINIMAL_NEEDLES,
    ORDER,
    REPLYING,
    REPLYING_NEEDLES,
    RESPONSE,
    RESPONSE_NEEDLES,
    SELF,
    SELF_NEEDLES,
    SUBJECTS,
    SUBJECTS_NEEDLES,
    Table,
    clauses,
    first_value,
    value_table,
)

__all__ = ["FIELDS", "MAX_CONTENT_CHARS", "RULES", "MemoryFacts", "Needles", "Rule", "derive"]

_log = logging.getLogger("projections.profile")

_PROFILE: Final = frozenset({"preference", "profile", "background", "constraint"})
_NAMES: Final = (
    "explanation_preference preferred_programming_language response_language citation_style"
    " math_notation daily_study_time major expertise_level"
)
FIELDS: Final[Mapping[str, frozenset[str]]] = {
    **dict.fromkeys(_NAMES.split(), _PROFILE),
    "exam_goal": _PROFILE | {"goal"},
}
"""Every profile field, with the memory categories allowed to feed it."""
MAX_CONTENT_CHARS: Final = 200
_TRAILING: Final = " .!?;"  # what normalise_content strips from the end, ASCII part
_MAX_VALUE: Final = 40
_OPEN: Final = frozenset({"daily_study_time", "major", "exam_goal"})

Pairs = Iterable[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class MemoryFacts:
    """What the rules may read of a memory."""

    memory_key: str
    content: str
    category: str
    scope_type: str = "global"
    workspace_type: str | None = None


@dataclass(frozen=True, slots=True)
class Needles:
    """Literal strings, one of which is in every match of `pattern`: a cheap test first.

    Declared by hand beside each pattern; tests/projections/test_needles.py checks that every
    string the pattern matches holds one of them, so a text without any cannot match.
    """

    pattern: re.Pattern[str]
    strings: tuple[str, ...]
    found: re.Pattern[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        longest_first = sorted(self.strings, key=lambda s: (-len(s), s))
        object.__setattr__(self, "found", re.compile("|".join(map(re.escape, longest_first))))


@dataclass(frozen=True, slots=True)
class Rule:
    """A named rule: (memory, normalised content) -> (field, value) pairs.

    Optional, for speed only: `fields` are the only fields it can give (it is skipped when the
    memory's category allows none of them), and `needs` are patterns it can only give
    something with, each with its needles: a content holding none of one pattern's needles
    skips the rule. Without them it always runs.
    """

    name: str
    apply: Callable[[MemoryFacts, str], Pairs]
    fields: frozenset[str] | None = None
    needs: tuple[Needles, ...] = ()


def _keyword(
    name: str,
    table: Table,
    values: tuple[str, ...] = (),
    trigger: str = "",
    near: tuple[str, ...] = (),
    *,
    positive: bool = True,
) -> Rule:
    """A rule: the first value of `table` in the first clause that also holds `trigger`.

    `values` and `near` are the needles of `table` and `trigger` (none: no prefilter).
    """
    trigger_pattern = re.compile(trigger)

    def apply(memory: MemoryFacts, text: str) -> Pairs:
        for clause in clauses(text, positive=positive):
            if trigger_pattern.search(clause) and (value := first_value(table, clause)):
                return [(name, value)]
        return []

    needs = ((table, values), (trigger_pattern, near))
    return Rule(name, apply, frozenset({name}), tuple(Needles(p, n) for p, n in needs if n))


def _explanation_order(clause: str) -> str | None:
    if not EXPLANATION.search(clause):
        return None  # the common case, and a cheap test
    for m in ORDER.finditer(clause.replace("-", " ").replace("_", " ")):
        said = m["after"] or m["first"] or m["with"] or m["front"] or m["liked"] or m["then"]
        if value := first_value(EXPLANATION, said):  # after 先: whichever is named first
            return value
    return None


def _explanation(memory: MemoryFacts, text: str) -> Pairs:
    values = (_explanation_order(clause) for clause in clauses(text))
    return [("explanation_preference", v) for v in values if v][:1]


# -- study time ------------------------------------------------------------------------------

_DIGITS: Final = dict(zip("零一二两三四五六七八九", (0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9), strict=True))
_NUMBERS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "half an": 0.5}
_DURATION: Final = re.compile(
    r"(?:(?<![a-z])(?P<n>\d+(?:\.\d+)?|[零一二两三四五六七八九十]+|an?|one|two|three|four|half an)"
    r"\s*个?)?(?P<half>半)?\s*(?P<unit>小时|钟头|分钟|hours?|hrs?|h|minutes?|mins?)(?![a-z])"
)
_WHEN: Final = (  # in order of precedence, wherever they stand
    ("weekdays", re.compile(r"工作日|平日|周一到周五|weekdays?|work ?days?|monday to friday")),
    ("weekends", re.compile(r"周末|双休|weekends?")),
    ("daily", re.compile(r"每天|每日|天天|一天|every ?day|each day|daily|a day|per day")),
)
_WHEN_NEEDLES = (
    "工作日", "平日", "周一到周五", "day", "周末", "双休", "weekend", "每天", "每日", "天天",
    "一天", "daily",
)  # fmt: skip
_DURATION_NEEDLES = ("小时", "钟头", "分钟", "h", "min")
_STUDY: Final = re.compile(r"学|复习|练习|刷题|看书|背单词|stud|learn|practi|revis|review")
_STUDY_NEEDLES = ("学", "复习", "练习", "刷题", "看书", "背单词", "stud", "learn", "practi", "revi")


def _number(said: str) -> float | None:
    if said[0].isdigit():
        return float(said)
    if said in _NUMBERS:
        return _NUMBERS[said]
    tens, ten, ones = said.partition("十")
    if not ten:
        return _DIGITS.get(said)
    high, low = _DIGITS.get(tens) if tens else 1, _DIGITS.get(ones) if ones else 0
    return None if high is None or low is None else high * 10 + low


def _minutes(clause: str) -> float | None:
    for m in _DURATION.finditer(clause):
        amount = _number(m["n"]) if m["n"] else 0.0 if m["half"] else None
        if amount is not None and m["unit"] in ("分钟", "minute", "minutes", "min", "mins"):
            minutes = amount
        elif amount is not None:
            minutes = amount * 60 + (30 if m["half"] else 0)
        else:
            continue
        if 0 < minutes <= 24 * 60:
            return minutes
    return None


def _study_parts(text: str, default_when: str | None) -> str:
    """Comma-joined "<amount>_<when>" of every clause giving a duration and when it applies."""
    parts: list[str] = []
    for clause in clauses(text, positive=False):
        minutes, when = _minutes(clause), next((v for v, p in _WHEN if p.search(clause)), None)
        if minutes is None or (when := when or default_when) is None:
            continue
        amount = f"{minutes / 60:g}h" if minutes >= 60 and minutes % 30 == 0 else f"{minutes:g}min"
        if f"{amount}_{when}" not in parts:
            parts.append(f"{amount}_{when}")
    return ",".join(parts)


def _study_time(memory: MemoryFacts, text: str) -> Pairs:
    parts = _study_parts(text, None) if _STUDY.search(text) else ""
    return [("daily_study_time", parts)] if parts else []


# -- exact key, and the engine ---------------------------------------------------------------

_VALUES: Final[Mapping[str, Table]] = {
    "explanation_preference": EXPLANATION,
    "preferred_programming_language": LANGUAGES,
    "response_language": RESPONSE,
    "citation_style": CITATIONS,
    "math_notation": re.compile(f"{MINIMAL.pattern}|{FORMAL.pattern}"),
    "major": SUBJECTS,
    "expertise_level": LEVELS,
    "exam_goal": EXAMS,
}


def _exact_key(memory: MemoryFacts, text: str) -> Pairs:
    field, text = memory.memory_key, text.replace("_", " ")
    if field not in FIELDS or len(text) > _MAX_VALUE:
        return []
    table = _VALUES.get(field, value_table())
    if (canonical := text.replace(" ", "_")) in table.groupindex:
        value: str | None = canonical
    elif field == "explanation_preference":
        value = _explanation_order(text) or first_value(table, text)
    elif field == "daily_study_time":
        value = _study_parts(text, "daily")
    else:
        value = first_value(table, text)
    if not value and field in _OPEN:
        value = re.sub(r"[\s\-/]+", "_", text).strip("_")
    return [(field, value)] if value else []


RULES: tuple[Rule, ...] = (
    Rule("exact_key", _exact_key),
    Rule(
        "explanation_preference",
        _explanation,
        frozenset({"explanation_preference"}),
        (Needles(EXPLANATION, EX_NEEDLES + DEF_NEEDLES),),
    ),
    _keyword("preferred_programming_language", LANGUAGES, (), LIKING, LIKING_NEEDLES),
    _keyword("response_language", RESPONSE, RESPONSE_NEEDLES, REPLYING, REPLYING_NEEDLES),
    _keyword("citation_style", CITATIONS, CITATIONS_NEEDLES, CITING, CITING_NEEDLES),
    # "不要公式": the negation is the point
    _keyword("math_notation", MINIMAL, MINIMAL_NEEDLES, positive=False),
    _keyword("math_notation", FORMAL, FORMAL_NEEDLES),
    Rule(
        "daily_study_time",
        _study_time,
        frozenset({"daily_study_time"}),
        (
            Needles(re.compile("|".join(p.pattern for _, p in _WHEN)), _WHEN_NEEDLES),
            Needles(_DURATION, _DURATION_NEEDLES),
            Needles(_STUDY, _STUDY_NEEDLES),
        ),
    ),
    _keyword("major", SUBJECTS, SUBJECTS_NEEDLES, MAJORING, MAJORING_NEEDLES),
    _keyword("expertise_level", LEVELS, LEVELS_NEEDLES, SELF, SELF_NEEDLES),
    _keyword("exam_goal", EXAMS, EXAMS_NEEDLES, AIMING, AIMING_NEEDLES),
)
"""Every rule, in precedence order: the first value a memory gives a field is kept."""


def derive(memory: MemoryFacts) -> dict[str, str]:
    """The profile fields this memory states; never raises (a failing rule yields nothing)."""
    allowed = _allowed(memory.category)
    content = memory.content
    if not allowed or not isinstance(content, str) or REDACTED in (content, memory.memory_key):
        return {}
    if len(content) > MAX_CONTENT_CHARS:
        return {}
    text = _normalised(content)
    fields: dict[str, str] = {}
    for rule in RULES:
        if rule.fields is not None and rule.fields.isdisjoint(allowed):
            continue  # whatever it gives would be dropped
        for needed in rule.needs:
            if not needed.found.search(text):
                break  # it cannot give anything here
        else:
            _run(rule, memory, text, allowed, fields)
    return fields


def _normalised(content: str) -> str:
    """`normalise_content(content)`, computed directly when the content is ASCII.

    On ASCII text NFKC changes nothing, casefold is lower(), and neither the punctuation the
    canonical form maps, nor the invisible characters it drops, nor CJK are ASCII: what is left
    is collapsing whitespace and stripping trailing punctuation, whose result is already a fixed
    point. (Half the memories are ASCII; the full form costs several passes over the text.)
    """
    if content.isascii():
        return " ".join(content.lower().split()).rstrip(_TRAILING)
    return normalise_content(content)


def _run(
    rule: Rule, memory: MemoryFacts, text: str, allowed: frozenset[str], fields: dict[str, str]
) -> None:
    """Apply one rule, keeping the first value it gives each allowed field."""
    try:
        pairs = list(rule.apply(memory, text))
    except Exception as error:
        # The content is personal: say which rule failed and how, never what it read.
        _log.error("profile rule %s failed: %s", rule.name, type(error).__name__)
        return
    for field, value in pairs:
        if field in allowed and isinstance(value, str) and 0 < len(value) <= _MAX_VALUE:
            fields.setdefault(field, value)


@functools.lru_cache(maxsize=32)
def _allowed(category: str) -> frozenset[str]:
    """The fields a memory of this category may feed."""
    return frozenset(f for f, categories in FIELDS.items() if category in categories)
