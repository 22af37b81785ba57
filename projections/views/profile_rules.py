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

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from domain.model.events import REDACTED
from domain.model.values import normalise_content
from projections.views.needles import needs

__all__ = ["FIELDS", "MAX_CONTENT_CHARS", "RULES", "MemoryFacts", "Rule", "derive"]

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
Table = re.Pattern[str]  # one named group per value


@dataclass(frozen=True, slots=True)
class MemoryFacts:
    """What the rules may read of a memory."""

    memory_key: str
    content: str
    category: str
    scope_type: str = "global"
    workspace_type: str | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """A named rule: (memory, normalised content) -> (field, value) pairs.

    Optional, for speed only: `fields` are the only fields it can give (it is skipped when the
    memory's category allows none of them), and `needs` are patterns that must all be found
    in the content for it to give anything (projections/views/needles.py); without them it
    always runs.
    """

    name: str
    apply: Callable[[MemoryFacts, str], Pairs]
    fields: frozenset[str] | None = None
    needs: tuple[re.Pattern[str], ...] = ()


def _w(alternatives: str) -> str:
    """Whole ASCII words (CJK letters count as \\w, so \\b would not separate "用python")."""
    return rf"(?<![a-z0-9+#])(?:{alternatives})(?![a-z0-9+#])"


def _table(*pairs: tuple[str, str]) -> Table:
    """(value, pattern) pairs as one pattern, a group named after each value."""
    merged: dict[str, list[str]] = {}
    for value, pattern in pairs:
        merged.setdefault(value, []).append(pattern)
    return re.compile("|".join(f"(?P<{v}>{'|'.join(p)})" for v, p in merged.items()))


def _words(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, _w(name)) for name in names)


def _first(table: Table, text: str) -> str | None:
    """The value named first in `text` (at the same place, the one listed first)."""
    m = table.search(text)
    return m.lastgroup if m else None


_SPLIT: Final = re.compile(r"[,;!?\n]|\.(?!\d)|(?<![a-z])but(?![a-z])|但是|但|而不是|而非")
_NEGATION: Final = re.compile(
    _w("not|no|never|don't|dont|doesn't|do not|avoid|hate|dislike|without") + "|不|别|没|讨厌|避免"
)


@functools.lru_cache(maxsize=64)  # every rule reads the clauses of the same memory
def _clauses(text: str, *, positive: bool = True) -> tuple[str, ...]:
    """The clauses of `text`; with `positive`, only those without a negation."""
    parts = [c.strip() for c in _SPLIT.split(text) if c.strip()]
    return tuple(c for c in parts if not (positive and _NEGATION.search(c)))


def _keyword(field: str, table: Table, trigger: str = "", positive: bool = True) -> Rule:
    """A rule: the first value of `table` in the first clause that also holds `trigger`."""
    near = re.compile(trigger)

    def apply(memory: MemoryFacts, text: str) -> Pairs:
        for clause in _clauses(text, positive=positive):
            if near.search(clause) and (value := _first(table, clause)):
                return [(field, value)]
        return []

    return Rule(field, apply, frozenset({field}), needs(table, near))


# -- explanation order -----------------------------------------------------------------------

_EX = r"(?:worked |concrete |real )?(?:examples?|instances?)|例子|示例|实例|例题|案例|举例"
_DEF = r"(?:formal )?(?:definitions?|theory|theories|concepts?|principles?)|定义|概念|理论|原理"
_EXPLANATION: Final = _table(("example_first", _EX), ("definition_first", _DEF))
_ORDER: Final = re.compile(
    rf"(?:{_EX}|{_DEF})\s+(?:after|following)\s+(?:the\s+)?(?P<after>{_EX}|{_DEF})"
    rf"|(?P<first>{_EX}|{_DEF})\s+(?:first|before|then|followed by|over|rather than|instead of)"
    rf"|(?:start|begin|lead|open)\w* with\s+(?:an?\s+|some\s+|the\s+)?(?P<with>{_EX}|{_DEF})"
    rf"|(?P<front>{_EX}|{_DEF})放?(?:在前|先行|先于|优先)"
    rf"|先(?P<then>.{{0,12}})"
    rf"|(?:prefer|like|love|learn best (?:from|with))\s+(?:lots of\s+|many\s+)?(?P<liked>{_EX})"
)


def _explanation_order(clause: str) -> str | None:
    if not _EXPLANATION.search(clause):
        return None  # the common case, and a cheap test
    for m in _ORDER.finditer(clause.replace("-", " ").replace("_", " ")):
        said = m["after"] or m["first"] or m["with"] or m["front"] or m["liked"] or m["then"]
        if value := _first(_EXPLANATION, said):  # after 先: whichever is named first
            return value
    return None


def _explanation(memory: MemoryFacts, text: str) -> Pairs:
    values = (_explanation_order(clause) for clause in _clauses(text))
    return [("explanation_preference", v) for v in values if v][:1]


# -- tables of known values ------------------------------------------------------------------

_LANGUAGES: Final = _table(
    ("javascript", _w("javascript|js")),
    ("typescript", _w("typescript|ts")),
    ("java", _w("java")),
    ("python", _w(r"python\d?")),
    ("go", _w("golang|go") + r"(?=\s*(?:语言|language|lang))|" + _w("golang")),
    ("cpp", _w(r"c\+\+|cpp")),
    ("csharp", _w("c#|csharp")),
    ("c", _w("c") + r"(?=\s*(?:语言|language))|^c$"),
    ("r", _w("r") + r"(?=\s*(?:语言|language))|^r$"),
    *_words("rust", "kotlin", "swift", "ruby", "php", "scala", "haskell", "julia", "matlab", "lua"),
)
_LIKING = (
    r"prefer|favou?rite|like|love|go to|main language|(?:usually|mainly) (?:write|code|use)"
    r"|(?:code|write|program|develop)\w* in|喜欢|偏好|偏爱|习惯|常用|主要用|首选|擅长|最爱"
    r"|(?:编程|开发)语言|用.{0,12}(?:写|编程|开发)"
)
_RESPONSE: Final = _table(
    ("en", r"英文|英语|english|^en$"), ("zh", r"中文|汉语|普通话|chinese|mandarin|^zh$")
)
_REPLYING = (
    r"(?:用|使用|以)(?:中文|汉语|普通话|简体中文|英文|英语).{0,3}(?:回答|回复|交流|解释|讲解|沟通|对话|说)"
    r"|(?:回答|回复|讲解|解释).{0,3}(?:用|使用)|(?:prefer|want|like) (?:chinese|mandarin|english)"
    r"|(?:answer|respond|reply|explain|talk|speak|communicate)\w*(?: to me)?(?: only)? in "
)
_CITATIONS: Final = _table(
    *_words("apa", "mla", "chicago", "ieee", "harvard", "vancouver"),
    ("gbt7714", r"gb ?/? ?t ?7714|国标"),
)
_MATH = r"(?:math|maths|mathematical|formulas?|formulae|equations?|notation|symbols?)(?![a-z])"
_MINIMAL: Final = _table(
    ("minimal", rf"(?:less|fewer|minimal|little|avoid\w*|no|without)\s+(?:\w+\s+){{0,2}}{_MATH}"),
    ("minimal", r"(?:少|不要|不需要|别|避免|不喜欢|减少|不用).{0,6}(?:公式|符号|推导)|^minimal$"),
)
_FORMAL: Final = _table(
    ("formal", r"(?:rigorous|formal|full|detailed|complete)\s+(?:math|mathematical|proofs?)"),
    ("formal", r"(?:严格|严谨|完整|详细)的?(?:数学)?(?:推导|证明)|^formal$"),
)
_SUBJECTS: Final = _table(
    ("computer_science", r"计算机|计科|" + _w("computer science|cs")),
    ("software_engineering", r"软件工程|" + _w("software engineering")),
    ("artificial_intelligence", r"人工智能|" + _w("artificial intelligence|ai")),
    ("data_science", r"数据科学|" + _w("data science")),
    ("electrical_engineering", r"电子|电气|" + _w("electrical engineering|electronics")),
    ("mechanical_engineering", r"机械|" + _w("mechanical engineering")),
    ("mathematics", r"数学|" + _w("mathematics|maths?")),
    *(
        (name, f"{zh}|{_w(name)}")
        for name, zh in (
            ("statistics", "统计"), ("physics", "物理"), ("chemistry", "化学"),
            ("biology", "生物"), ("medicine", "医学"), ("economics", "经济"), ("finance", "金融"),
            ("accounting", "会计"), ("law", "法学"), ("psychology", "心理"),
            ("philosophy", "哲学"), ("history", "历史"), ("literature", "文学"),
            ("english", "英语"), ("education", "教育"),
        )
    ),
)  # fmt: skip
_LEVELS: Final = _table(
    ("beginner", r"初学者|新手|零基础|小白|刚入门|" + _w("beginner|novice|newbie|new to")),
    ("intermediate", r"有一定基础|中级|中等水平|" + _w("intermediate")),
    ("advanced", r"资深|专家|精通|熟练|" + _w("advanced|expert|experienced|proficient")),
)
_EXAMS: Final = _table(
    ("postgraduate_entrance_exam", r"考研|研究生入学考试"),
    ("gaokao", r"高考|" + _w("gaokao")),
    ("cet4", r"英语四级|四级考试|" + _w("cet[ -]?4")),
    ("cet6", r"英语六级|六级考试|" + _w("cet[ -]?6")),
    ("ielts", r"雅思|" + _w("ielts")),
    ("toefl", r"托福|" + _w("toefl")),
    ("civil_service_exam", r"考公|公务员考试|国考|" + _w("civil service exam")),
    ("cpa", r"注册会计师|" + _w("cpa")),
    ("teacher_certification", r"教师资格证?|教资"),
    ("bar_exam", r"法考|司法考试|" + _w("bar exam")),
    ("jlpt", r"日语能力考试|" + _w("jlpt")),
    *_words("gre", "gmat"),
)


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
_STUDY: Final = re.compile(r"学|复习|练习|刷题|看书|背单词|stud|learn|practi|revis|review")


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
    for clause in _clauses(text, positive=False):
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
    "explanation_preference": _EXPLANATION,
    "preferred_programming_language": _LANGUAGES,
    "response_language": _RESPONSE,
    "citation_style": _CITATIONS,
    "math_notation": re.compile(f"{_MINIMAL.pattern}|{_FORMAL.pattern}"),
    "major": _SUBJECTS,
    "expertise_level": _LEVELS,
    "exam_goal": _EXAMS,
}


def _exact_key(memory: MemoryFacts, text: str) -> Pairs:
    field, text = memory.memory_key, text.replace("_", " ")
    if field not in FIELDS or len(text) > _MAX_VALUE:
        return []
    table = _VALUES.get(field, _table())
    if (canonical := text.replace(" ", "_")) in table.groupindex:
        value: str | None = canonical
    elif field == "explanation_preference":
        value = _explanation_order(text) or _first(table, text)
    elif field == "daily_study_time":
        value = _study_parts(text, "daily")
    else:
        value = _first(table, text)
    if not value and field in _OPEN:
        value = re.sub(r"[\s\-/]+", "_", text).strip("_")
    return [(field, value)] if value else []


RULES: tuple[Rule, ...] = (
    Rule("exact_key", _exact_key),
    Rule(
        "explanation_preference",
        _explanation,
        frozenset({"explanation_preference"}),
        needs(_EXPLANATION),
    ),
    _keyword("preferred_programming_language", _LANGUAGES, _LIKING),
    _keyword("response_language", _RESPONSE, _REPLYING),
    _keyword("citation_style", _CITATIONS, r"cit|referenc|bibliograph|引用|文献|格式|style|format"),
    _keyword("math_notation", _MINIMAL, positive=False),  # "不要公式": the negation is the point
    _keyword("math_notation", _FORMAL),
    Rule(
        "daily_study_time",
        _study_time,
        frozenset({"daily_study_time"}),
        needs("|".join(p.pattern for _, p in _WHEN), _DURATION, _STUDY),
    ),
    _keyword("major", _SUBJECTS, r"专业|主修|本科|读的是|学的是|major|degree in|bachelor"),
    _keyword("expertise_level", _LEVELS, _w("i|i'm|i am|my|me") + "|我|水平|基础"),
    _keyword("exam_goal", _EXAMS, r"考|准备|目标|通过|冲刺|prepar|goal|aim|pass|take|exam|test"),
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
            if not needed.search(text):
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
