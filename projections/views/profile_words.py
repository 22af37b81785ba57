"""The words of the profile rules: value tables, trigger patterns, their needles, clauses.

Each table is one pattern with a group named after each value it can give; beside each pattern
stand its needles (projections/views/profile_rules.py `Needles`): literal strings, one of
which every match holds. Used by projections/views/profile_rules.py only.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = [
    "AIMING",
    "AIMING_NEEDLES",
    "CITATIONS",
    "CITATIONS_NEEDLES",
    "CITING",
    "CITING_NEEDLES",
    "DEF_NEEDLES",
    "EXAMS",
    "EXAMS_NEEDLES",
    "EXPLANATION",
    "EX_NEEDLES",
    "FORMAL",
    "FORMAL_NEEDLES",
    "LANGUAGES",
    "LEVELS",
    "LEVELS_NEEDLES",
    "LIKING",
    "LIKING_NEEDLES",
    "MAJORING",
    "MAJORING_NEEDLES",
    "MINIMAL",
    "MINIMAL_NEEDLES",
    "ORDER",
    "REPLYING",
    "REPLYING_NEEDLES",
    "RESPONSE",
    "RESPONSE_NEEDLES",
    "SELF",
    "SELF_NEEDLES",
    "SUBJECTS",
    "SUBJECTS_NEEDLES",
    "Table",
    "clauses",
    "first_value",
    "value_table",
    "whole",
    "words",
]

Table = re.Pattern[str]  # one named group per value


def whole(alternatives: str) -> str:
    """Whole ASCII words (CJK letters count as \\w, so \\b would not separate "用python")."""
    return rf"(?<![a-z0-9+#])(?:{alternatives})(?![a-z0-9+#])"


def value_table(*pairs: tuple[str, str]) -> Table:
    """(value, pattern) pairs as one pattern, a group named after each value."""
    merged: dict[str, list[str]] = {}
    for value, pattern in pairs:
        merged.setdefault(value, []).append(pattern)
    return re.compile("|".join(f"(?P<{v}>{'|'.join(p)})" for v, p in merged.items()))


def words(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, whole(name)) for name in names)


def first_value(table: Table, text: str) -> str | None:
    """The value named first in `text` (at the same place, the one listed first)."""
    m = table.search(text)
    return m.lastgroup if m else None


_SPLIT: Final = re.compile(r"[,;!?\n]|\.(?!\d)|(?<![a-z])but(?![a-z])|但是|但|而不是|而非")
_NEGATION: Final = re.compile(
    whole("not|no|never|don't|dont|doesn't|do not|avoid|hate|dislike|without")
    + "|不|别|没|讨厌|避免"
)


@functools.lru_cache(maxsize=64)  # every rule reads the clauses of the same memory
def clauses(text: str, *, positive: bool = True) -> tuple[str, ...]:
    """The clauses of `text`; with `positive`, only those without a negation."""
    parts = [c.strip() for c in _SPLIT.split(text) if c.strip()]
    return tuple(c for c in parts if not (positive and _NEGATION.search(c)))


# -- explanation order -----------------------------------------------------------------------

_EX = r"(?:worked |concrete |real )?(?:examples?|instances?)|例子|示例|实例|例题|案例|举例"
EX_NEEDLES = ("example", "instance", "例子", "示例", "实例", "例题", "案例", "举例")
_DEF = r"(?:formal )?(?:definitions?|theory|theories|concepts?|principles?)|定义|概念|理论|原理"
DEF_NEEDLES = ("definition", "theor", "concept", "principle", "定义", "概念", "理论", "原理")
EXPLANATION: Final = value_table(("example_first", _EX), ("definition_first", _DEF))
ORDER: Final = re.compile(
    rf"(?:{_EX}|{_DEF})\s+(?:after|following)\s+(?:the\s+)?(?P<after>{_EX}|{_DEF})"
    rf"|(?P<first>{_EX}|{_DEF})\s+(?:first|before|then|followed by|over|rather than|instead of)"
    rf"|(?:start|begin|lead|open)\w* with\s+(?:an?\s+|some\s+|the\s+)?(?P<with>{_EX}|{_DEF})"
    rf"|(?P<front>{_EX}|{_DEF})放?(?:在前|先行|先于|优先)"
    rf"|先(?P<then>.{{0,12}})"
    rf"|(?:prefer|like|love|learn best (?:from|with))\s+(?:lots of\s+|many\s+)?(?P<liked>{_EX})"
)


# -- tables of known values ------------------------------------------------------------------

LANGUAGES: Final = value_table(
    ("javascript", whole("javascript|js")),
    ("typescript", whole("typescript|ts")),
    ("java", whole("java")),
    ("python", whole(r"python\d?")),
    ("go", whole("golang|go") + r"(?=\s*(?:语言|language|lang))|" + whole("golang")),
    ("cpp", whole(r"c\+\+|cpp")),
    ("csharp", whole("c#|csharp")),
    ("c", whole("c") + r"(?=\s*(?:语言|language))|^c$"),
    ("r", whole("r") + r"(?=\s*(?:语言|language))|^r$"),
    *words("rust", "kotlin", "swift", "ruby", "php", "scala", "haskell", "julia", "matlab", "lua"),
)  # no needles: "c" and "r" alone are languages, found in nearly every text
LIKING = (
    r"prefer|favou?rite|like|love|go to|main language|(?:usually|mainly) (?:write|code|use)"
    r"|(?:code|write|program|develop)\w* in|喜欢|偏好|偏爱|习惯|常用|主要用|首选|擅长|最爱"
    r"|(?:编程|开发)语言|用.{0,12}(?:写|编程|开发)"
)
LIKING_NEEDLES = (
    "prefer", "favorite", "favourite", "like", "love", "go to", "main language", "usually",
    "mainly", "code", "write", "program", "develop", "喜欢", "偏好", "偏爱", "习惯", "常用", "用",
    "首选", "擅长", "最爱", "编程语言", "开发语言",
)  # fmt: skip
RESPONSE: Final = value_table(
    ("en", r"英文|英语|english|^en$"), ("zh", r"中文|汉语|普通话|chinese|mandarin|^zh$")
)
RESPONSE_NEEDLES = ("英文", "英语", "en", "中文", "汉语", "普通话", "chinese", "mandarin", "zh")
REPLYING = (
    r"(?:用|使用|以)(?:中文|汉语|普通话|简体中文|英文|英语).{0,3}(?:回答|回复|交流|解释|讲解|沟通|对话|说)"
    r"|(?:回答|回复|讲解|解释).{0,3}(?:用|使用)|(?:prefer|want|like) (?:chinese|mandarin|english)"
    r"|(?:answer|respond|reply|explain|talk|speak|communicate)\w*(?: to me)?(?: only)? in "
)
REPLYING_NEEDLES = (
    "中文", "汉语", "普通话", "英文", "英语", "回答", "回复", "讲解", "解释", "chinese", "mandarin",
    "english", " in ",
)  # fmt: skip
CITATIONS: Final = value_table(
    *words("apa", "mla", "chicago", "ieee", "harvard", "vancouver"),
    ("gbt7714", r"gb ?/? ?t ?7714|国标"),
)
CITATIONS_NEEDLES = ("apa", "mla", "chicago", "ieee", "harvard", "vancouver", "7714", "国标")
CITING = r"cit|referenc|bibliograph|引用|文献|格式|style|format"
CITING_NEEDLES = ("cit", "referenc", "bibliograph", "引用", "文献", "格式", "style", "format")
_MATH = r"(?:math|maths|mathematical|formulas?|formulae|equations?|notation|symbols?)(?![a-z])"
MINIMAL: Final = value_table(
    ("minimal", rf"(?:less|fewer|minimal|little|avoid\w*|no|without)\s+(?:\w+\s+){{0,2}}{_MATH}"),
    ("minimal", r"(?:少|不要|不需要|别|避免|不喜欢|减少|不用).{0,6}(?:公式|符号|推导)|^minimal$"),
)
MINIMAL_NEEDLES = (
    "math", "formula", "equation", "notation", "symbol", "公式", "符号", "推导", "minimal",
)  # fmt: skip
FORMAL: Final = value_table(
    ("formal", r"(?:rigorous|formal|full|detailed|complete)\s+(?:math|mathematical|proofs?)"),
    ("formal", r"(?:严格|严谨|完整|详细)的?(?:数学)?(?:推导|证明)|^formal$"),
)
FORMAL_NEEDLES = ("math", "proof", "推导", "证明", "formal")
SUBJECTS: Final = value_table(
    ("computer_science", r"计算机|计科|" + whole("computer science|cs")),
    ("software_engineering", r"软件工程|" + whole("software engineering")),
    ("artificial_intelligence", r"人工智能|" + whole("artificial intelligence|ai")),
    ("data_science", r"数据科学|" + whole("data science")),
    ("electrical_engineering", r"电子|电气|" + whole("electrical engineering|electronics")),
    ("mechanical_engineering", r"机械|" + whole("mechanical engineering")),
    ("mathematics", r"数学|" + whole("mathematics|maths?")),
    *(
        (name, f"{zh}|{whole(name)}")
        for name, zh in (
            ("statistics", "统计"), ("physics", "物理"), ("chemistry", "化学"),
            ("biology", "生物"), ("medicine", "医学"), ("economics", "经济"), ("finance", "金融"),
            ("accounting", "会计"), ("law", "法学"), ("psychology", "心理"),
            ("philosophy", "哲学"), ("history", "历史"), ("literature", "文学"),
            ("english", "英语"), ("education", "教育"),
        )
    ),
)  # fmt: skip
SUBJECTS_NEEDLES = (
    "计算机", "计科", "computer science", "cs", "软件工程", "software engineering", "人工智能",
    "artificial intelligence", "ai", "数据科学", "data science", "电子", "电气",
    "electrical engineering", "electronics", "机械", "mechanical engineering", "数学", "math",
    "统计", "statistics", "物理", "physics", "化学", "chemistry", "生物", "biology", "医学",
    "medicine", "经济", "economics", "金融", "finance", "会计", "accounting", "法学", "law",
    "心理", "psychology", "哲学", "philosophy", "历史", "history", "文学", "literature", "英语",
    "english", "教育", "education",
)  # fmt: skip
MAJORING = r"专业|主修|本科|读的是|学的是|major|degree in|bachelor"
MAJORING_NEEDLES = ("专业", "主修", "本科", "读的是", "学的是", "major", "degree in", "bachelor")
LEVELS: Final = value_table(
    ("beginner", r"初学者|新手|零基础|小白|刚入门|" + whole("beginner|novice|newbie|new to")),
    ("intermediate", r"有一定基础|中级|中等水平|" + whole("intermediate")),
    ("advanced", r"资深|专家|精通|熟练|" + whole("advanced|expert|experienced|proficient")),
)
LEVELS_NEEDLES = (
    "初学者", "新手", "零基础", "小白", "刚入门", "beginner", "novice", "new", "有一定基础", "中级",
    "中等水平", "intermediate", "资深", "专家", "精通", "熟练", "advanced", "expert", "experienced",
    "proficient",
)  # fmt: skip
SELF = whole("i|i'm|i am|my|me") + "|我|水平|基础"
SELF_NEEDLES = ("i", "my", "me", "我", "水平", "基础")
EXAMS: Final = value_table(
    ("postgraduate_entrance_exam", r"考研|研究生入学考试"),
    ("gaokao", r"高考|" + whole("gaokao")),
    ("cet4", r"英语四级|四级考试|" + whole("cet[ -]?4")),
    ("cet6", r"英语六级|六级考试|" + whole("cet[ -]?6")),
    ("ielts", r"雅思|" + whole("ielts")),
    ("toefl", r"托福|" + whole("toefl")),
    ("civil_service_exam", r"考公|公务员考试|国考|" + whole("civil service exam")),
    ("cpa", r"注册会计师|" + whole("cpa")),
    ("teacher_certification", r"教师资格证?|教资"),
    ("bar_exam", r"法考|司法考试|" + whole("bar exam")),
    ("jlpt", r"日语能力考试|" + whole("jlpt")),
    *words("gre", "gmat"),
)
EXAMS_NEEDLES = (
    "考研", "研究生入学考试", "高考", "gaokao", "四级", "六级", "cet", "雅思", "ielts", "托福",
    "toefl", "考公", "公务员考试", "国考", "civil service exam", "注册会计师", "cpa", "教师资格",
    "教资", "法考", "司法考试", "bar exam", "日语能力考试", "jlpt", "gre", "gmat",
)  # fmt: skip
AIMING = r"考|准备|目标|通过|冲刺|prepar|goal|aim|pass|take|exam|test"
AIMING_NEEDLES = (
    "考", "准备", "目标", "通过", "冲刺", "prepar", "goal", "aim", "pass", "take", "exam", "test",
)  # fmt: skip
