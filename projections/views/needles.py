"""Which strings every match of a regular expression must contain: a prefilter for rules.

A rule that searches clauses of a text (a clause is a substring of it) cannot match a text
that holds none of the strings its pattern needs, so the rule can be skipped there. The
needles are read off the parsed pattern, never written by hand, so they follow any change of
the rules (projections/views/profile_rules.py).

This reads the standard library's private regex parser (`re._parser`, `re._constants`, named
so since Python 3.11). Anything it does not know, or a parser that changed shape, gives no
prefilter, never a wrong one: tests/projections/test_needles.py pins that the needles are still
found, and tests/projections/test_projection_batches.py that skipping never changes a result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from re import _constants as _C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any, Final

__all__ = ["needles", "needs"]

_EXACT_LIMIT: Final = 64  # the most strings an "every string it can match" set may hold


@dataclass(frozen=True, slots=True)
class _Shape:
    exact: frozenset[str] | None  # every string the node can match (None: unknown or too many)
    needles: frozenset[str] | None  # every match contains one of these (None: nothing known)


_NONE: Final = _Shape(None, None)
_EMPTY: Final = _Shape(frozenset({""}), None)  # zero-width: matches nothing but ""


def _usable(strings: frozenset[str] | None) -> frozenset[str] | None:
    return strings if strings and "" not in strings else None


def _best(candidates: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    """The most selective needle set: longest shortest needle, then fewest needles."""
    usable = [c for c in map(_usable, candidates) if c]
    return max(usable, key=lambda c: (min(map(len, c)), -len(c)), default=None)


def _sequence(items: Iterable[tuple[Any, Any]]) -> _Shape:
    run: frozenset[str] = frozenset({""})  # the strings the current run of exact items makes
    candidates: list[frozenset[str] | None] = []
    exact = True
    for op, av in items:
        shape = _item(op, av)
        candidates.append(shape.needles)
        if shape.exact is not None and len(run) * len(shape.exact) <= _EXACT_LIMIT:
            run = frozenset(a + b for a in run for b in shape.exact)
            continue
        exact = False
        candidates.append(run)
        run = shape.exact if shape.exact is not None else frozenset({""})
    candidates.append(run)
    return _Shape(run if exact else None, _best(candidates))


def _item(op: Any, av: Any) -> _Shape:
    if op is _C.LITERAL:
        return _Shape(frozenset({chr(av)}), frozenset({chr(av)}))
    if op is _C.IN:
        chars: set[str] = set()
        for kind, value in av:
            if kind is _C.LITERAL:
                chars.add(chr(value))
            elif kind is _C.RANGE and value[1] - value[0] < _EXACT_LIMIT:
                chars.update(map(chr, range(value[0], value[1] + 1)))
            else:
                return _NONE  # negated, a category, a wide range
        return _Shape(frozenset(chars), _usable(frozenset(chars))) if chars else _NONE
    if op is _C.BRANCH:
        shapes = [_sequence(alternative) for alternative in av[1]]
        exact: frozenset[str] | None = None
        if all(s.exact is not None for s in shapes):
            exact = frozenset().union(*(s.exact for s in shapes if s.exact is not None))
            exact = exact if len(exact) <= _EXACT_LIMIT else None
        needles = [s.needles for s in shapes]
        union = frozenset().union(*needles) if all(needles) else None  # type: ignore[arg-type]
        return _Shape(exact, _best([union, exact]))
    if op is _C.SUBPATTERN:
        if av[1] & re.IGNORECASE:
            raise ValueError("case-insensitive group")
        return _sequence(av[3])
    if op is _C.ATOMIC_GROUP:
        return _sequence(av)
    if op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT):
        low, high, inner = av[0], av[1], _sequence(av[2])
        if low == high == 1:
            return inner
        if low == 0 and high == 1 and inner.exact is not None:
            return _Shape(inner.exact | {""}, None)
        return _Shape(None, inner.needles if low >= 1 else None)
    if op is _C.AT or op is _C.ASSERT_NOT:
        return _EMPTY
    if op is _C.ASSERT:  # what a lookaround sees is in the searched text too
        return _Shape(frozenset({""}), _sequence(av[1]).needles)
    return _NONE  # any character, a category, a back reference, ...


def needles(pattern: str | re.Pattern[str]) -> re.Pattern[str] | None:
    """A pattern found in every text where `pattern` is (None: no such test is known)."""
    compiled = re.compile(pattern)
    try:
        if compiled.flags & re.IGNORECASE:
            raise ValueError("case-insensitive pattern")
        needles = _sequence(_parser.parse(compiled.pattern, compiled.flags)).needles
    except Exception:  # an unexpected pattern: no prefilter, never a wrong one
        return None
    if not needles:
        return None
    return re.compile("|".join(map(re.escape, sorted(needles, key=lambda n: (-len(n), n)))))


def needs(*patterns: str | re.Pattern[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(n for n in map(needles, patterns) if n is not None)
