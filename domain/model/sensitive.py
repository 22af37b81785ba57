"""The sensitive-content guard of section 15: secrets the ledger must refuse to store.

`find_sensitive(text)` returns the first `SensitiveMatch`, trying the kinds below in this order
(specific formats before keyword rules); the `kind` strings are stable, the descriptions are for
people and never repeat the matched text:

- `private_key`: a PEM/OpenSSH/PGP/PuTTY private key block (an `ssh-rsa AAAA...` public key
  passes);
- `api_key`: provider key formats (`sk-`, `sk-proj-`, `sk_live_`, `AKIA`/`ASIA`, `ghp_`/`gho_`/...,
  `github_pat_`, `xox[baprs]-`, `AIza`), or "api key / client secret / 密钥" with a random value;
- `token`: a JWT (`eyJ...`.`eyJ...`.`...`), `Bearer <token>`, "token / access token / 令牌" with a
  random value;
- `credential`: a URL with a password (`postgres://u:p@host`), a user + password pair, "credentials
  / 凭据 / 私钥 / seed phrase / 助记词" followed by a value;
- `bank_account`: payment secrets: a card security code (CVV/CVC, 安全码), an IBAN passing its
  check digits, a bank account number after its keyword (银行卡号, account number, ...);
- `verification_code`: a one-time code after "验证码 / 动态码 / OTP / verification code ...";
- `password`: "password / passcode / pwd / PIN / 密码 / 口令 / 授权码" followed by a value;
- `session_id`: "session id / sessionid / JSESSIONID / 会话ID" with a value, `Cookie: name=value`;
- `card_number`: 13-19 digits (spaces or dashes allowed) starting with 2-6 and passing Luhn.

Known limits: these are deterministic rules, not a classifier. They look at the NFKC form of the
text with zero-width characters removed. Keyword rules need a value right after the keyword and a
separator (`is`, `:`, `=`, `是`, `为`, or a bare space before a value holding a digit), so talk
*about* passwords or tokens passes, while a secret written without its keyword ("hunter2"), split
over several messages, spelled out ("h u n t e r 2"), encoded, or in a language other than
Chinese or English, is not caught. Values must be printable ASCII, so a password made of Chinese
characters is missed. Plain English words after "password is" are taken as descriptions ("strong",
"required") when listed in a small stop-list, otherwise as a secret. Card numbers rely on Luhn,
so about one random 13-19 digit number in ten starting with 2-6 is flagged; phone numbers after
`+` are skipped.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from domain.model.keyword_gate import KeywordGate

__all__ = ["SENSITIVE_KINDS", "SensitiveMatch", "find_sensitive"]

SENSITIVE_KINDS: Final = frozenset(
    {
        "private_key",
        "api_key",
        "token",
        "credential",
        "bank_account",
        "verification_code",
        "password",
        "session_id",
        "card_number",
    }
)


@dataclass(frozen=True)
class SensitiveMatch:
    """What kind of secret was found; `description` is safe to show and never holds the secret."""

    kind: str
    description: str


_Check = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class _Rule:
    kind: str
    description: str
    pattern: re.Pattern[str]
    check: _Check | None = None
    # Substrings one of which every match holds (lowercase when the pattern ignores case): a
    # text holding none of them is not scanned with this rule. Empty: always scanned.
    gate: tuple[str, ...] = ()


_I: Final = re.IGNORECASE
_INVISIBLE: Final = re.compile("[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")

# Keyword rules: a keyword, a separator, then a value. `(?<![a-z])` rather than `\b`, because
# `\b` sees no boundary between a CJK character and an ASCII letter ("我的password是...").
_SEP: Final = (
    r"(?P<sep>\s*[:=#]\s*|\s+(?:is|was|are|were)(?:\s*:\s*|\s+)|\s*(?:是|为|為)\s*:?\s*|\s+)"
)
_STRONG_SEP: Final = r"(?P<sep>\s*[:=]\s*|\s+(?:is|was)(?:\s*:\s*|\s+)|\s*(?:是|为|為)\s*:?\s*)"
_OPEN_QUOTE: Final = "(?:[\"'`\u201c\u2018\u300c\u300e\u300a(<\\[]\\s*)?"
_VALUE: Final = _OPEN_QUOTE + r"(?P<value>[\x21-\x7e]+)"
_TOKEN_VALUE: Final = _OPEN_QUOTE + r"(?P<value>[A-Za-z0-9._~+/=-]+)"

_DIGIT_GROUP_SEPARATOR: Final = re.compile("[ -]")
# The gate of the rules that need an ASCII digit: not a keyword, looked for on its own.
_DIGIT: Final = "[0-9]"
_HAS_DIGIT: Final = re.compile(_DIGIT)
_TRIM: Final = "\"'`.,;:!?)]}>"
# English words that describe a secret rather than being one: "my password is strong".
_STOP_WORDS_TEXT: Final = """
    a an the not too very so really quite also still now always never usually just only and or
    but no none yes weak strong long short secure insecure safe unsafe hard easy simple complex
    complicated required needed optional mandatory important stored saved hashed encrypted salted
    expired expiring wrong incorrect correct invalid valid reset changed updated same different
    case being been in on at of for to from with by into my your his her their our its it this
    that these those what which where how why who whom something anything nothing everything
    unknown forgotten lost hidden private secret confidential personal sensitive set stuck
    missing empty blank managed kept generated random unique protected shared necessary
    here there see check use ask enter type change update remember forgot forget
    case-sensitive like about over under more less least most enough again
    one two three four five six eight ten twelve fifteen eighteen twenty twenty-four words
"""
_STOP_WORDS: Final = frozenset(_STOP_WORDS_TEXT.split())


def _trimmed(match: re.Match[str]) -> str:
    return match.group("value").rstrip(_TRIM).lstrip(_TRIM)


def _char_classes(value: str) -> int:
    return sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )


def _random_value(min_len: int) -> _Check:
    """A value that looks machine-made: long enough, mixing letter cases or letters and digits."""

    def check(match: re.Match[str]) -> bool:
        value = _trimmed(match)
        if len(value) < min_len or _char_classes(value) < 2:
            return False
        # "text-embedding-3-small" mixes classes too; machine-made values carry more digits or
        # mix both cases over a longer stretch.
        digits = sum(c.isdigit() for c in value)
        mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
        return digits >= 2 or (mixed_case and len(value) >= 20)

    return check


def _worded_value(min_len: int) -> _Check:
    """A value that is not a descriptive word; after a bare space it must also hold a digit."""

    def check(match: re.Match[str]) -> bool:
        value = _trimmed(match)
        if len(value) < min_len or set(value) <= {"*", "\u2022"}:  # masked
            return False
        if value.startswith(("/", "~/")):  # `pwd` prints a directory
            return False
        if not match.group("sep").strip():
            return len(value) >= 4 and any(c.isdigit() for c in value)
        return value.lower() not in _STOP_WORDS

    return check


def _session_value(match: re.Match[str]) -> bool:
    value = _trimmed(match)
    return len(value) >= 8 and (_char_classes(value) >= 2 or (value.isdigit() and len(value) >= 10))


def _one_time_code(match: re.Match[str]) -> bool:
    value = match.group("value")
    if not any(c.isdigit() for c in value):
        return False
    # "OTP 2024" is more likely a year than a code: English keywords need `is`/`:` or 6+ chars.
    return bool(match.group("sep").strip()) or not match.group("kw").isascii() or len(value) >= 6


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _iban(match: re.Match[str]) -> bool:
    compact = match.group(0).replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _account_number(match: re.Match[str]) -> bool:
    return 8 <= len(_digits(match.group("value"))) <= 34


def _card_run(match: re.Match[str]) -> bool:
    """Any run of digit groups whose whole groups make 13-19 digits passing the card checks."""
    groups = _DIGIT_GROUP_SEPARATOR.split(match.group(0))
    for start in range(len(groups)):
        digits = ""
        for group in groups[start:]:
            digits += group
            if len(digits) > 19:
                break
            if len(digits) >= 13 and _is_card_number(digits):
                return True
    return False


def _is_card_number(digits: str) -> bool:
    return digits[0] in "23456" and len(set(digits)) > 1 and _luhn(digits)


def _rule(
    kind: str,
    description: str,
    pattern: str,
    check: _Check | None = None,
    flags: int = _I,
    *,
    gate: tuple[str, ...],
) -> _Rule:
    if flags & _I and any(g != g.lower() for g in gate):
        raise ValueError(f"the gate of the {description!r} rule ignores case: write it lowercase")
    return _Rule(kind, description, re.compile(pattern, flags), check, gate)


_RULES: Final[tuple[_Rule, ...]] = (
    _rule(
        "private_key",
        "a private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d",
        flags=0,
        gate=("-----BEGIN ", "PuTTY-User-Key-File-"),
    ),
    _rule(
        "api_key",
        "an API key",
        r"(?<![A-Za-z0-9_-])sk-(?P<value>[A-Za-z0-9_-]{20,})",
        lambda m: _char_classes(m.group("value")) >= 2,
        flags=0,
        gate=("sk-",),
    ),
    _rule(
        "api_key",
        "an API key",
        r"(?<![A-Za-z0-9_-])(?:"
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
        r"|gh[pousr]_[A-Za-z0-9]{20,}"
        r"|github_pat_[A-Za-z0-9_]{20,}"
        r"|xox[baprs]-[A-Za-z0-9-]{10,}"
        r"|AIza[0-9A-Za-z_-]{30,}"
        r")",
        flags=0,
        gate=("k_live_", "k_test_", "AKIA", "ASIA", "gh", "github_pat_", "xox", "AIza"),
    ),
    _rule(
        "token",
        "a JSON Web Token",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        flags=0,
        gate=("eyJ",),
    ),
    _rule(
        "credential",
        "a connection string or URL holding a password",
        r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{1,30}://[^\s/:@]+:(?P<value>[^\s/@]+)@[^\s/@]",
        lambda m: set(m.group("value")) != {"*"},
        gate=("://",),
    ),
    _rule(
        "credential",
        "a user name with its password",
        r"(?:(?<![a-z])(?:user(?:\s*name)?|login)|用户名|账号|帐号|账户)\s*(?:[:=]|是|为)\s*"
        r"[\x21-\x7e]+[\s\S]{0,20}?"
        r"(?:(?<![a-z])(?:pass(?:word)?|passwd|pwd)|密码|口令)(?P<sep>\s*(?:[:=]|是|为)\s*)"
        r"(?P<value>[\x21-\x7e]+)",
        _worded_value(1),
        gate=("pass", "pwd", "密码", "口令"),
    ),
    _rule(
        "bank_account",
        "a card security code (CVV/CVC)",
        r"(?:(?<![a-z])(?:cvv2?|cvc2?|card\s+(?:security|verification)\s+(?:code|value)"
        r"|security\s+code)|安全码|(?:信用)?卡验证码|cvv码)"
        r"\s*(?:[:=#]|is|是|为)?\s*(?P<value>\d{3,4})(?!\d)"
        # "CSC 148" is a course code: these two need an explicit separator.
        r"|(?<![a-z])(?:csc|cvn)\s*(?:[:=]|\s+is\s+)\s*\d{3,4}(?!\d)",
        gate=("cvv", "cvc", "card", "security", "安全码", "验证码", "csc", "cvn"),
    ),
    _rule(
        "bank_account",
        "an IBAN",
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])",
        _iban,
        flags=re.ASCII,
        gate=(_DIGIT,),
    ),
    _rule(
        "bank_account",
        "a bank account number",
        r"(?:(?<![a-z])(?:bank\s+account(?:\s+(?:number|no\.?|#))?|account\s+(?:number|no\.?|#)"
        r"|acct\.?\s*(?:number|no\.?|#)|routing\s+number)"
        r"|(?:银行|信用|储蓄|借记)卡(?:卡)?号|银行(?:账|帐)(?:号|户)|(?:收款|开户)(?:账|帐)(?:号|户))"
        r"\s*(?:[:=#]|is|是|为)?\s*(?P<value>\d(?:[ -]?\d){7,33})(?!\d)",
        _account_number,
        gate=("account", "acct", "routing", "卡号", "银行", "收款", "开户"),
    ),
    _rule(
        "verification_code",
        "a one-time verification code",
        r"(?P<kw>(?<![a-z0-9])(?:t?otp|one[\s-]?time\s+(?:pass(?:word|code)|code|pin)"
        r"|(?:verification|confirmation|security|login|sign[\s-]?in|auth(?:entication)?|access"
        r"|sms|2fa|mfa|two[\s-]?factor)\s+code)"
        r"|验证码|校验码|动态码|动态密码|短信码|确认码|登录码|一次性密码)"
        r"(?P<sep>\s*[:=#]\s*|\s+(?:is|was)\s*:?\s*|\s*(?:是|为)\s*:?\s*|\s*)"
        r"(?P<value>[a-z0-9]{4,8})(?![a-z0-9])",
        _one_time_code,
        gate=("otp", "time", "code", "码"),
    ),
    _rule(
        "password",
        "a PIN",
        r"(?<![a-z])pin(?:\s*(?:code|number)|码)?(?:\s*[:=]\s*|\s+is\s+|\s*(?:是|为)\s*)"
        r"(?P<value>\d{4,8})(?!\d)",
        gate=("pin",),
    ),
    _rule(
        "password",
        "a password",
        r"(?<![a-z])(?:password|passwd|passcode|pass\s?phrase|pin)\s+(?:for|of|on|to)"
        r"(?:\s+[^\s:=]{1,30}){1,3}?" + _STRONG_SEP + _VALUE,
        _worded_value(3),
        gate=("pass", "pin"),
    ),
    _rule(
        "password",
        "a password",
        r"(?:(?<![a-z])(?:password|passwd|passcode|pass\s?phrase|pwd|pw(?=\s*[:=]))"
        r"|密码|密碼|口令|授权码)" + _SEP + _VALUE,
        _worded_value(3),
        gate=("pass", "pw", "密码", "密碼", "口令", "授权码"),
    ),
    _rule(
        "session_id",
        "a session identifier",
        r"(?:(?<![a-z])(?:session[\s_-]?(?:id|key|token|cookie)|sessionid|sessid|jsessionid"
        r"|phpsessid|asp\.net_sessionid|connect\.sid)|会话\s*(?:id|标识|令牌|密钥))"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        _session_value,
        gate=("sess", "connect.sid", "会话"),
    ),
    _rule(
        "session_id",
        "a cookie value",
        r"(?<![a-z])(?:set-)?cookie\s*(?::|是|为)\s*(?P<value>[^\s=;:,]{1,64}=[^\s;,]{4,})",
        gate=("cookie",),
    ),
    _rule(
        "token",
        "a bearer token",
        r"(?<![a-z])bearer\s+" + _TOKEN_VALUE,
        _random_value(16),
        gate=("bearer",),
    ),
    _rule(
        "token",
        "an access token",
        r"(?:(?<![a-z])(?:(?:access|refresh|auth|api|bot|oauth|id|personal\s+access|github"
        r"|gitlab|slack|discord|telegram|npm|pypi)[\s_-]?token)|(?:访问|刷新|身份)?令牌)"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        _random_value(12),
        gate=("token", "令牌"),
    ),
    _rule(
        "token",
        "a token",
        r"(?<![a-z])token(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        _random_value(16),
        gate=("token",),
    ),
    _rule(
        "api_key",
        "an API key or client secret",
        r"(?:(?<![a-z])(?:api[\s_-]?(?:key|secret)|apikey|app[\s_-]?(?:key|secret)"
        r"|client[\s_-]?secret|secret[\s_-]?(?:access[\s_-]?)?key|access[\s_-]?key(?:[\s_-]?id)?)"
        r"|(?:api\s*)?(?:密钥|秘钥))"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        _random_value(16),
        gate=("key", "secret", "密钥", "秘钥"),
    ),
    _rule(
        "credential",
        "a private key",
        r"(?:(?<![a-z])private[\s_-]?key|私钥)"
        r"(?:\s*[:=]\s*|\s+(?:is|was)\s+|\s*(?:是|为)\s*:?\s*)" + _TOKEN_VALUE,
        _random_value(8),
        gate=("private", "私钥"),
    ),
    _rule(
        "credential",
        "login credentials",
        r"(?:(?<![a-z])(?:credentials?|login\s+details|seed\s+phrase|recovery\s+phrase"
        r"|mnemonic(?:\s+phrase)?)|凭据|登录凭证|助记词)"
        r"(?P<sep>\s*[:=]\s*|\s+(?:is|are|was|were)\s+|\s*(?:是|为)\s*:?\s*)" + _VALUE,
        _worded_value(3),
        gate=("credential", "login", "phrase", "mnemonic", "凭据", "凭证", "助记词"),
    ),
    _rule(
        "card_number",
        "a payment card number",
        r"(?<![A-Za-z0-9+])(?<![0-9][ .,-])(?>[0-9]+(?:[ -][0-9]+)*)(?![A-Za-z0-9])",
        _card_run,
        flags=re.ASCII,
        gate=(_DIGIT,),
    ),
)


# The characters other than ASCII letters that a case-insensitive pattern matches to one
# (dotted and dotless i, long s, Kelvin sign): folded to that letter so no gate misses them.
_FOLD: Final = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDABLE: Final = re.compile("[\u0130\u0131\u017f\u212a]")
# Gates of case-insensitive rules are looked for in the folded text, the others as they are.
_FOLDED_GATE: Final = KeywordGate(
    g for r in _RULES if r.pattern.flags & _I for g in r.gate if g != _DIGIT
)
_EXACT_GATE: Final = KeywordGate(
    g for r in _RULES if not r.pattern.flags & _I for g in r.gate if g != _DIGIT
)
# For each gate keyword, the (positions of the) rules it opens.
_OPENS: Final = {
    g: frozenset(i for i, r in enumerate(_RULES) if g in r.gate) for r in _RULES for g in r.gate
}
_ALWAYS: Final = frozenset(i for i, r in enumerate(_RULES) if not r.gate)


def find_sensitive(text: str) -> SensitiveMatch | None:
    """Return the first secret found in `text`, or None when it may be stored."""
    prepared = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    # Most texts hold no keyword of most rules: one pass over the text skips their scans.
    folded = (prepared.translate(_FOLD) if _FOLDABLE.search(prepared) else prepared).lower()
    possible = _FOLDED_GATE.possible(folded) | _EXACT_GATE.possible(prepared)
    if _HAS_DIGIT.search(prepared):
        possible |= {_DIGIT}
    opened = _ALWAYS.union(*(_OPENS[g] for g in possible))
    for index in sorted(opened):  # in the order of the rules
        rule = _RULES[index]
        for match in rule.pattern.finditer(prepared):
            if rule.check is None or rule.check(match):
                return SensitiveMatch(rule.kind, rule.description)
    return None
