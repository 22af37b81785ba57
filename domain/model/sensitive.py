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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from domain.model.sensitive_rules import DIGIT, RULES

__all__ = ["SENSITIVE_KINDS", "KeywordGate", "SensitiveMatch", "find_sensitive"]


def _may_start_inside(outer: str, inner: str) -> bool:
    """True when an occurrence of `inner` can begin within an occurrence of `outer`."""
    return any(
        outer[i:].startswith(inner) or inner.startswith(outer[i:]) for i in range(len(outer))
    )


class KeywordGate:
    """A single alternation of literal keywords, matched without any case folding."""

    def __init__(self, keywords: Iterable[str]) -> None:
        words = sorted(set(keywords), key=lambda w: (-len(w), w))  # longest first
        if not words or "" in words:
            raise ValueError("a keyword gate needs non-empty keywords")
        self._pattern = re.compile("|".join(map(re.escape, words)))
        # One scan reports non-overlapping matches only: a keyword starting inside a reported
        # one may be hidden by it, so each report stands for the keywords it could hide.
        self._covers = {
            word: frozenset(other for other in words if _may_start_inside(word, other))
            for word in words
        }

    def possible(self, text: str) -> frozenset[str]:
        """A superset of the keywords occurring in `text` (empty when none occurs)."""
        found = set(self._pattern.findall(text))
        if not found:
            return frozenset()
        if len(found) == 1:
            return self._covers[found.pop()]
        return frozenset().union(*(self._covers[word] for word in found))


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


_INVISIBLE: Final = re.compile("[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")
_HAS_DIGIT: Final = re.compile(DIGIT)


# The characters other than ASCII letters that a case-insensitive pattern matches to one
# (dotted and dotless i, long s, Kelvin sign): folded to that letter so no gate misses them.
_FOLD: Final = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDABLE: Final = re.compile("[\u0130\u0131\u017f\u212a]")
# Gates of case-insensitive rules are looked for in the folded text, the others as they are.
_FOLDED_GATE: Final = KeywordGate(
    g for r in RULES if r.pattern.flags & re.IGNORECASE for g in r.gate if g != DIGIT
)
_EXACT_GATE: Final = KeywordGate(
    g for r in RULES if not r.pattern.flags & re.IGNORECASE for g in r.gate if g != DIGIT
)
# For each gate keyword, the (positions of the) rules it opens.
_OPENS: Final = {
    g: frozenset(i for i, r in enumerate(RULES) if g in r.gate) for r in RULES for g in r.gate
}
_ALWAYS: Final = frozenset(i for i, r in enumerate(RULES) if not r.gate)


def find_sensitive(text: str) -> SensitiveMatch | None:
    """Return the first secret found in `text`, or None when it may be stored."""
    prepared = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    # Most texts hold no keyword of most rules: one pass over the text skips their scans.
    folded = (prepared.translate(_FOLD) if _FOLDABLE.search(prepared) else prepared).lower()
    possible = _FOLDED_GATE.possible(folded) | _EXACT_GATE.possible(prepared)
    if _HAS_DIGIT.search(prepared):
        possible |= {DIGIT}
    opened = _ALWAYS.union(*(_OPENS[g] for g in possible))
    for index in sorted(opened):  # in the order of the rules
        rule = RULES[index]
        for match in rule.pattern.finditer(prepared):
            if rule.check is None or rule.check(match):
                return SensitiveMatch(rule.kind, rule.description)
    return None
