"""Workspace content rules (CORE_MEMORY_DESIGN.md sections 3, 5, 11, 15): what a workspace's
memories may not hold, recognised by deterministic bilingual (Chinese/English) rules.

- teaching, rule `student_personal_info`: a memory of the teacher may not hold a student's
  personal situation. Refused when one sentence names or singles out a student ("学生张三",
  "李四同学", "学号 2023015", "my student Tom", "Tom, one of my students", "student #12") and
  says something personal about them: marks and results (不及格, 考了 58 分, failed, GPA),
  behaviour and discipline (作弊, 打架, 处分, detention, bullying), health and special needs
  (多动症, 抑郁, 过敏, ADHD, dyslexia, diagnosed, IEP), family (父母离婚, 单亲, 低保, custody,
  foster) or contact details (家庭住址, 电话, address, phone number).
- teaching, rule `class_records`: nor class business data (TeachingStore's): a named class
  ("三年二班", "初二(3)班", "class 5B", "period 3") with its records (平均分, 及格率, 排名,
  名单, 考勤, average score, pass rate, roster, attendance, grades).
- research, rule `project_rule`: a memory of the researcher may not hold a project's rules or
  instructions (they belong in the Research Project Profile). Refused when one sentence speaks
  of one specific project, group or lab ("本项目", "该课题", "这个项目", "课题组", "实验室",
  "Alpha项目", "this project", "our project", "our lab", "project Phoenix", "the Phoenix
  project") and gives a directive (必须, 一律, 统一, 不得, 禁止, 只能, 要求, must, always,
  never, only use, is required, do not), or when it names the rules outright (项目规范,
  项目要求, 组规, 实验室规定, "project rules", "project guidelines", "lab policy").

Everything else passes: general statements ("学生们更喜欢先看例子", "my students like group
work"), the teacher's own habits ("批改作业时先写评语再给分数"), personal research habits ("I
always use Python for my projects", "我做项目时习惯先写文献综述"). Global memories and the
learning workspace have no content rule here (secrets are refused everywhere, see
`sensitive.py`); the agent tools also apply the rules of the token's workspace to global saves.

Known limits: these are deterministic rules, not a classifier. They read the NFKC form of the
text with zero-width characters removed, one sentence at a time (split at 。！？；!?; newlines
and ". "), so a student named in one sentence and described in the next passes. Chinese names
are recognised only next to 学生/同学/学员 and only with one of about 90 common surnames (or
小/阿 + one character after 学生); English names only as a capitalised word next to
student/pupil, so "Tom has ADHD" alone, nicknames, initials ("student T."), pinyin or other
languages pass. A named project in Chinese is recognised only when its name is Latin,
quoted (「…」, "…", 《…》) or precedes 项目组/课题组; "阿尔法项目必须…" passes. Directives
phrased without the listed words ("we use seed 42 for all runs in project X") pass. False
refusals are possible too: a sentence about a student who happens to carry a common surname
("学生王牌…"), a Latin-named kind of project ("我的Python项目必须…"), or a personal
habit phrased as a rule of a specific project ("in this project I always write tests
first"). A refusal names the rule, never the text it matched.
"""

# Full-width CJK punctuation is matched on purpose.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from domain.errors import InvalidInput
from domain.model.values import Scope

__all__ = [
    "RULES",
    "WORKSPACE_RULES",
    "WorkspaceContentRefused",
    "WorkspaceRuleMatch",
    "check_workspace_content",
    "find_workspace_violation",
]


class WorkspaceContentRefused(InvalidInput):
    """The content breaks a content rule of the memory's workspace (answered 422)."""

    def __init__(self, field: str, workspace: str, rule: str, description: str) -> None:
        super().__init__(field, f"{description}; {workspace} memories may not store it")
        self.workspace = workspace
        self.rule = rule


@dataclass(frozen=True, slots=True)
class WorkspaceRuleMatch:
    """Which rule of which workspace refused the text; `description` never quotes the text."""

    workspace: str
    rule: str
    description: str


_I: Final = re.IGNORECASE
_INVISIBLE: Final = re.compile("[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")
_SENTENCES: Final = re.compile(r"[。！？；!?;\n]+|\.(?:\s+|$)")
_HAN: Final = "\u4e00-\u9fff"

# -- teaching: students -----------------------------------------------------------------------

# About 90 of the most common Chinese surnames, plus a few compound ones. Surnames that are also
# everyday words next to 学生 (高, 常, 方, 马, 于, 向, 关, 金, 白, ...) are left out on purpose.
_SURNAMES: Final = (
    "欧阳|司马|上官|诸葛|东方|皇甫|慕容|"
    "[王李张刘陈杨黄赵吴周徐孙朱胡郭何林罗郑梁谢宋唐许韩冯邓曹彭曾萧肖董袁潘蒋蔡杜叶程苏魏"
    "吕丁沈姚卢姜崔钟谭陆汪范廖贾韦傅邹孟熊秦邱尹薛闫侯陶贺顾郝龚邵钱覃戴孔汤庞樊殷葛莫柳鲍"
    "骆邢裴]"
)
_ZH_NAME: Final = f"(?:(?:{_SURNAMES})[{_HAN}]{{1,2}}|[{_HAN}]某|[小阿][{_HAN}])"
_ZH_STUDENT: Final = (
    f"(?:学生|学员|同学|孩子|班上的|班里的)\\s*[:：]?\\s*{_ZH_NAME}"
    f"|(?:{_SURNAMES})[{_HAN}]{{1,2}}\\s*(?:同学|这(?:个|名|位)学生)"
    r"|学号\s*[:：]?\s*\d{3,}"
)
# A capitalised word that is not a sentence opener or a pronoun ("Also, my students ...").
_EN_NAME: Final = (
    r"(?!(?:Also|And|But|So|Then|My|Our|The|All|Most|Some|Many|Every|Everyone|Everybody|Nobody"
    r"|Someone|Students|Kids|Children|When|If|Because|This|That|These|Those|Here|There)(?![a-z]))"
    r"[A-Z][a-z]+(?:\s+[A-Z]\.?)?"
)
_EN_STUDENT: Final = (
    rf"(?:(?<![A-Za-z])(?:[Ss]tudent|[Pp]upil|[Ll]earner|[Tt]utee|[Mm]entee)s?"
    rf"\s+(?:(?:named|called)\s+)?{_EN_NAME}(?![a-z])"
    rf"|(?<![A-Za-z]){_EN_NAME},?\s+(?:one\s+of\s+my|a|my|our)\s+(?:students|pupils|student|pupil)"
    rf"|(?<![A-Za-z]){_EN_NAME}\s+(?:\([^)]*\)\s+)?in\s+my\s+(?:class|homeroom|group)"
    r"|(?<![A-Za-z])student\s*(?:#|no\.?|number|id)\s*:?\s*\d+)"
)
_STUDENT: Final = re.compile(f"{_ZH_STUDENT}|{_EN_STUDENT}")

_ZH_PERSONAL: Final = (
    # marks and results
    r"不及格|没及格|挂科|补考|\d+(?:\.\d+)?\s*分(?![钟之])|成绩|分数|排名|倒数第|名次|留级|"
    # behaviour and discipline
    r"作弊|抄袭|打架|逃课|旷课|早恋|违纪|处分|记过|叛逆|霸凌|欺负|被欺负|偷窃|"
    # health and special needs
    r"多动症|注意力缺陷|自闭|孤独症|抑郁|焦虑症|读写障碍|学习障碍|残疾|过敏|哮喘|癫痫|糖尿病|"
    r"生病|住院|吃药|服药|心理问题|心理咨询|确诊|"
    # family
    r"父母离婚|离异|单亲|留守|低保|家暴|家境|家庭困难|家庭情况|贫困|孤儿|"
    # contact details
    r"家庭住址|住址|家住|电话|手机号|身份证"
)
_EN_PERSONAL: Final = (
    r"(?<![A-Za-z])(?:"
    r"fail(?:s|ed|ing)?|grades?|scored?|scores|marks|GPA|test\s+results?|exam\s+results?"
    r"|report\s+card|held\s+back|repeat(?:s|ed|ing)?\s+(?:a\s+)?year"
    r"|cheat(?:s|ed|ing)?|plagiari[sz]\w*|fight(?:s|ing)?|fought|bull(?:y|ies|ied|ying)"
    r"|detention|suspended|suspension|expelled|misbehav\w*|disruptive|truan\w*|skips?\s+class"
    r"|ADHD|autis\w*|asperger\w*|dyslexi\w*|dyspraxi\w*|anxiety|depress\w*|diagnos\w*"
    r"|medication|medicine|allerg\w*|asthma|epilep\w*|diabet\w*|disabilit\w*|disabled|illness"
    r"|sick|hospital\w*|therapy|therapist|counsel(?:l)?ing|IEP|504\s+plan|special\s+needs"
    r"|divorc\w*|custody|foster|single\s+(?:mom|mum|dad|parent)|orphan\w*|abuse\w*|neglect\w*"
    r"|free\s+(?:school\s+)?(?:lunch|meals)|poverty|low[\s-]income|family\s+(?:problems?|issues?"
    r"|situation|income|circumstances)|home\s+address|phone\s+number|date\s+of\s+birth|birthday"
    r")(?![A-Za-z])"
)
_PERSONAL: Final = re.compile(f"{_ZH_PERSONAL}|{_EN_PERSONAL}", _I)

_CLASS: Final = re.compile(
    r"[一二三四五六七八九十高初]{1,2}[年级]*\s*[(（]?\s*[\d一二三四五六七八九十]{1,2}\s*[)）]?\s*班"
    r"|\d{1,2}\s*班(?!次)"
    r"|(?<![A-Za-z])(?:[Cc]lass|[Ff]orm|[Ss]ection|[Pp]eriod|[Hh]omeroom)\s+\d{1,2}[A-Za-z]?(?!\w)"
    r"|(?<![A-Za-z])(?:[Cc]lass|[Ff]orm)\s+[A-Z]\d?(?!\w)",
)
_CLASS_RECORDS: Final = re.compile(
    r"平均分|及格率|优秀率|排名|名单|花名册|考勤|出勤|缺勤|成绩单|分数段|"
    r"(?<![A-Za-z])(?:average\s+(?:score|mark|grade)s?|mean\s+score|pass\s+rate|roster"
    r"|attendance|grades|marks|scores|ranking|class\s+list|gradebook)(?![A-Za-z])",
    _I,
)

# -- research: project rules -------------------------------------------------------------------

_ZH_PROJECT: Final = (
    r"(?:本|该|此|这个|这一?个?|这项|那个|那项|我们的?|我们组的?|组里的?)\s*(?:项目|课题|研究项目)"
    r"|项目组|课题组|实验室|研究组"
    r"|[A-Za-z][\w-]*\s*(?:项目|课题)"
    r"|[「『\"“《][^」』\"”》]{1,30}[」』\"”》]\s*(?:项目|课题)"
)
_EN_PROJECT: Final = (
    r"(?<![A-Za-z])(?:"
    r"(?:[Tt]his|[Tt]hat|[Oo]ur|[Cc]urrent)\s+(?:research\s+)?project"
    r"|[Oo]ur\s+(?:lab|group|team)"
    r"|[Pp]roject\s+(?:(?!I(?![\w-]))[A-Z][\w-]*|\"[^\"]+\"|'[^']+')"
    r"|(?:[Tt]he|[Oo]ur)\s+[A-Z][\w-]*\s+project"
    r")(?![a-z])"
)
_PROJECT: Final = re.compile(f"{_ZH_PROJECT}|{_EN_PROJECT}")
_DIRECTIVE: Final = re.compile(
    r"必须|务必|一律|统一(?:使用|用|采用)|不得|不准|不能|不允许|禁止|只能|只允许|只用|应当|须|"
    r"要求|规定|"
    r"(?<![A-Za-z])(?:must(?:n't)?|shall|always|never|only\s+use|only\s+be|"
    r"(?:is|are)\s+(?:required|mandatory|forbidden|not\s+allowed)|required\s+to|have\s+to|has\s+to"
    r"|do\s+not|don't|should\s+(?:always|never|only))(?![A-Za-z])",
    _I,
)
_RULE_NOUN: Final = re.compile(
    r"项目(?:规则|规范|要求|指令|约定|守则|制度|章程|纪律)|组规|(?:实验室|课题组)(?:规定|规则|规范|制度)|"
    r"(?<![A-Za-z])(?:project\s+(?:rules?|guidelines?|conventions?|instructions?|polic(?:y|ies)"
    r"|requirements?|standards?)|(?:lab|group|team)\s+(?:rules?|polic(?:y|ies)))(?![A-Za-z])",
    _I,
)


def _both(first: re.Pattern[str], second: re.Pattern[str]) -> Callable[[str], bool]:
    def check(sentence: str) -> bool:
        return bool(first.search(sentence) and second.search(sentence))

    return check


def _project_rule(sentence: str) -> bool:
    return bool(
        _RULE_NOUN.search(sentence) or (_PROJECT.search(sentence) and _DIRECTIVE.search(sentence))
    )


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    description: str
    applies: Callable[[str], bool]


WORKSPACE_RULES: Final[dict[str, tuple[_Rule, ...]]] = {
    "learning": (),
    "teaching": (
        _Rule(
            "student_personal_info",
            "looks like personal information about a student (marks, behaviour, health, family"
            " or contact details); keep it in the teaching records, not in memory",
            _both(_STUDENT, _PERSONAL),
        ),
        _Rule(
            "class_records",
            "looks like class records (scores, rankings, rosters or attendance of a class);"
            " keep them in the teaching records, not in memory",
            _both(_CLASS, _CLASS_RECORDS),
        ),
    ),
    "research": (
        _Rule(
            "project_rule",
            "looks like a rule or instruction of a specific project; put it in the Research"
            " Project Profile, not in memory",
            _project_rule,
        ),
    ),
}
"""The content rules of each workspace, tried in order on each sentence."""

RULES: Final = frozenset(r.name for rules in WORKSPACE_RULES.values() for r in rules)
"""The stable rule names a refusal may carry."""


def _sentences(text: str) -> list[str]:
    prepared = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return [s for s in _SENTENCES.split(prepared) if s.strip()]


def find_workspace_violation(workspace: str | None, text: str) -> WorkspaceRuleMatch | None:
    """The first rule of `workspace` that refuses `text`, or None (no rule for None/unknown)."""
    rules = WORKSPACE_RULES.get(workspace or "", ())
    if not rules or not text:
        return None
    for sentence in _sentences(text):
        for rule in rules:
            if rule.applies(sentence):
                assert workspace is not None
                return WorkspaceRuleMatch(workspace, rule.name, rule.description)
    return None


def check_workspace_content(
    scope: Scope | str | None, content: str, field: str = "content"
) -> None:
    """Raise WorkspaceContentRefused if `content` breaks a rule of the workspace.

    `scope` is a memory's Scope (global scope has no rule) or a workspace name (the tools pass
    the token's workspace, so a teaching agent cannot park a student's details in global).
    """
    workspace = scope.workspace_type if isinstance(scope, Scope) else scope
    match = find_workspace_violation(workspace, content)
    if match is not None:
        raise WorkspaceContentRefused(field, match.workspace, match.rule, match.description)
