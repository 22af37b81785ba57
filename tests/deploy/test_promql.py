"""The PromQL reader the monitoring checks rely on (tests/deploy/promql.py): it finds every
selector, matcher and grouping label, and flags what a scrape does not have."""

from __future__ import annotations

import pytest

from tests.deploy.promql import mismatches, read_query

SCRAPE = {
    "memledger_http_requests_total": frozenset({"route", "method", "status", "job", "instance"}),
    "memledger_http_request_seconds_bucket": frozenset({"route", "method", "status", "le"}),
    "memledger_projection_lag": frozenset({"projection", "job", "instance"}),
}


def test_selectors_matchers_and_grouping_are_read() -> None:
    query = read_query(
        "histogram_quantile(0.95, sum by (route, le) (rate("
        'memledger_http_request_seconds_bucket{status=~"5..", route!="/metrics"}'
        "[$__rate_interval])))"
        " / on() group_left sum(rate(memledger_http_requests_total[5m] offset 1h)) > bool 0"
    )
    assert [(s.name, s.labels) for s in query.selectors] == [
        ("memledger_http_request_seconds_bucket", frozenset({"status", "route"})),
        ("memledger_http_requests_total", frozenset()),
    ]
    first, second = query.aggregations
    assert (first.op, first.grouping, first.labels) == ("sum", "by", frozenset({"route", "le"}))
    assert [s.name for s in first.selectors] == ["memledger_http_request_seconds_bucket"]
    assert (second.grouping, [s.name for s in second.selectors]) == (
        "",
        ["memledger_http_requests_total"],
    )


def test_a_trailing_grouping_clause_and_strings_holding_braces() -> None:
    query = read_query('max(memledger_projection_lag{projection!~"{a,b}(x)"}) by (projection)')
    [aggregation] = query.aggregations
    assert aggregation.labels == {"projection"}
    assert [s.labels for s in query.selectors] == [frozenset({"projection"})]


def test_a_query_of_exported_names_has_no_mismatch() -> None:
    query = read_query(
        'sum by (route, status) (rate(memledger_http_requests_total{status="503"}[5m]))'
    )
    assert mismatches(query, SCRAPE, {"route", "status"}) == []


@pytest.mark.parametrize(
    ("expr", "shown", "expected"),
    [
        ("rate(memledger_http_requests[5m])", set(), "no metric memledger_http_requests"),
        (
            'memledger_projection_lag{view="x"}',
            set(),
            "memledger_projection_lag has no label ['view']",
        ),
        (
            "sum by (tool) (rate(memledger_http_requests_total[5m]))",
            set(),
            "sum by ['tool']: not on memledger_http_requests_total",
        ),
        (
            "sum by (route) (rate(memledger_http_requests_total[5m]))",
            {"status"},
            "shows ['status'], not a label of the result",
        ),
        (
            "memledger_projection_lag * on (tool) memledger_http_requests_total",
            set(),
            "matching on ['tool']: no such label",
        ),
    ],
)
def test_what_the_scrape_lacks_is_named(expr: str, shown: set[str], expected: str) -> None:
    assert mismatches(read_query(expr), SCRAPE, shown) == [expected]


@pytest.mark.parametrize(
    "expr",
    [
        "rat(memledger_projection_lag[5m])",  # an unknown function
        "memledger_projection_lag ; 1",  # a character PromQL does not have
        '{__name__="memledger_projection_lag"}',  # a selector this reader cannot check
        "sum(memledger_projection_lag",  # unbalanced
    ],
)
def test_what_it_cannot_read_raises(expr: str) -> None:
    with pytest.raises(ValueError):
        read_query(expr)
