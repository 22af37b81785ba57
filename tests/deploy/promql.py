"""A small PromQL reader for tests: which metrics a query selects, with which label matchers,
and which labels its aggregations group by, so a dashboard's or a rule's queries can be
checked against the names and labels a scrape of /metrics really holds.

Not a full parser: it tokenizes the whole query (an unknown character or function raises), and
reads selectors, matchers, aggregations and grouping clauses from the token stream.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Aggregation", "Query", "Selector", "mismatches", "read_query"]

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
    | (?P<range>\[[^\]]*\])
    | (?P<duration>\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*\b)
    | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}])
    """,
    re.VERBOSE,
)
AGGREGATIONS = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ]
)
FUNCTIONS = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "count_over_time",
        "day_of_month",
        "day_of_week",
        "delta",
        "deriv",
        "exp",
        "floor",
        "histogram_quantile",
        "holt_winters",
        "hour",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "ln",
        "log10",
        "log2",
        "max_over_time",
        "min_over_time",
        "minute",
        "month",
        "predict_linear",
        "quantile_over_time",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sort",
        "sort_desc",
        "sqrt",
        "stddev_over_time",
        "stdvar_over_time",
        "sum_over_time",
        "time",
        "timestamp",
        "vector",
        "year",
    ]
)
_CLAUSES = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
_KEYWORDS = frozenset(["and", "or", "unless", "bool", "offset", "atan2"]) | _CLAUSES


@dataclass(frozen=True)
class Selector:
    """A metric selector: its name and the labels its matchers name."""

    name: str
    labels: frozenset[str]
    position: int


@dataclass(frozen=True)
class Aggregation:
    """`op by|without (labels) (argument)`: the metrics selected inside its argument."""

    op: str
    grouping: str  # "by", "without" or "" (no clause)
    labels: frozenset[str]
    argument: tuple[int, int]  # token positions of its parentheses
    selectors: tuple[Selector, ...] = ()


@dataclass
class Query:
    selectors: list[Selector] = field(default_factory=list)
    aggregations: list[Aggregation] = field(default_factory=list)
    matching: set[str] = field(default_factory=set)  # labels of on/ignoring/group_* clauses

    def outer_aggregations(self) -> list[Aggregation]:
        """The aggregations not inside another one's argument."""
        return [
            a
            for a in self.aggregations
            if not any(
                b is not a and b.argument[0] < a.argument[0] < b.argument[1]
                for b in self.aggregations
            )
        ]


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise ValueError(f"cannot read {expr[at : at + 20]!r} in {expr!r}")
        at = match.end()
        if match.lastgroup != "space":
            tokens.append((match.lastgroup or "", match.group()))
    return tokens


def _closing(tokens: list[tuple[str, str]], opening: int) -> int:
    pair = {"(": ")", "{": "}"}[tokens[opening][1]]
    depth = 0
    for at in range(opening, len(tokens)):
        if tokens[at][1] == tokens[opening][1]:
            depth += 1
        elif tokens[at][1] == pair:
            depth -= 1
            if depth == 0:
                return at
    raise ValueError(f"unbalanced {tokens[opening][1]!r}")


def _label_list(tokens: list[tuple[str, str]], opening: int) -> tuple[frozenset[str], int]:
    if tokens[opening][1] != "(":
        raise ValueError(f"expected a label list, found {tokens[opening][1]!r}")
    end = _closing(tokens, opening)
    names = [value for kind, value in tokens[opening + 1 : end] if kind == "name"]
    return frozenset(names), end


def _matchers(tokens: list[tuple[str, str]], opening: int) -> tuple[frozenset[str], int]:
    end = _closing(tokens, opening)
    inner = tokens[opening + 1 : end]
    labels = [value for at, (kind, value) in enumerate(inner) if kind == "name" and at % 4 == 0]
    for at in range(0, len(inner), 4):  # label op "value" ,
        group = inner[at : at + 3]
        if (
            len(group) != 3
            or group[0][0] != "name"
            or group[1][1] not in {"=", "!=", "=~", "!~"}
            or group[2][0] != "string"
        ):
            raise ValueError(f"cannot read the matchers {inner!r}")
    return frozenset(labels), end


def read_query(expr: str) -> Query:
    """The selectors, aggregations and matching labels of one PromQL expression."""
    tokens = _tokens(expr)
    query = Query()
    at = 0
    while at < len(tokens):
        kind, value = tokens[at]
        following = tokens[at + 1][1] if at + 1 < len(tokens) else ""
        if kind == "name" and value in AGGREGATIONS:
            clause, labels, opening = "", frozenset[str](), at + 1
            if following in {"by", "without"}:
                clause = following
                labels, end = _label_list(tokens, at + 2)
                opening = end + 1
            close = _closing(tokens, opening)
            if not clause and close + 1 < len(tokens) and tokens[close + 1][1] in {"by", "without"}:
                clause = tokens[close + 1][1]
                labels, _ = _label_list(tokens, close + 2)
            query.aggregations.append(Aggregation(value, clause, labels, (opening, close)))
            at = opening + 1
            continue
        if kind == "name" and value in {"group_left", "group_right"} and following != "(":
            at += 1  # no label list: only the matching labels are kept
            continue
        if kind == "name" and value in _CLAUSES:
            labels, end = _label_list(tokens, at + 1)
            if value not in {"by", "without"}:
                query.matching |= labels
            at = end + 1
            continue
        if kind == "name" and following == "(" and value not in _KEYWORDS:
            if value not in FUNCTIONS:
                raise ValueError(f"unknown function {value!r} in {expr!r}")
            at += 1
            continue
        if kind == "name" and value not in _KEYWORDS:
            labels, end = frozenset[str](), at
            if following == "{":
                labels, end = _matchers(tokens, at + 1)
            query.selectors.append(Selector(value, labels, at))
            at = end + 1
            continue
        if value == "{":
            raise ValueError(f"a selector without a metric name in {expr!r}")
        at += 1
    query.aggregations = [
        Aggregation(
            a.op,
            a.grouping,
            a.labels,
            a.argument,
            tuple(s for s in query.selectors if a.argument[0] < s.position < a.argument[1]),
        )
        for a in query.aggregations
    ]
    return query


def mismatches(query: Query, scrape: Mapping[str, frozenset[str]], shown: set[str]) -> list[str]:
    """What the query names (and the labels `shown` of its result: a legend, an annotation)
    that `scrape` (each sample name with its labels) does not have."""
    found: list[str] = []
    for selector in query.selectors:
        if selector.name not in scrape:
            found.append(f"no metric {selector.name}")
        elif missing := selector.labels - scrape[selector.name]:
            found.append(f"{selector.name} has no label {sorted(missing)}")
    for aggregation in query.aggregations:
        for selector in aggregation.selectors:
            if missing := aggregation.labels - scrape.get(selector.name, aggregation.labels):
                found.append(f"{aggregation.op} by {sorted(missing)}: not on {selector.name}")
    known = frozenset().union(*(scrape.get(s.name, frozenset()) for s in query.selectors))
    if missing := query.matching - known:
        found.append(f"matching on {sorted(missing)}: no such label")
    result = known
    if outer := query.outer_aggregations():
        result = frozenset().union(*(_kept(a, scrape) for a in outer))
    if missing := shown - result:
        found.append(f"shows {sorted(missing)}, not a label of the result")
    return found


def _kept(aggregation: Aggregation, scrape: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The labels an aggregation's result carries."""
    if aggregation.grouping == "by":
        return aggregation.labels
    inner = frozenset().union(*(scrape.get(s.name, frozenset()) for s in aggregation.selectors))
    return inner - aggregation.labels if aggregation.grouping == "without" else frozenset()
