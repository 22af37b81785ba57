"""The labelled set's reports as text: one ranker's, and lexical beside hybrid per kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render", "render_side_by_side"]


def _fmt(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def render(report: Mapping[str, Any]) -> str:
    s = report["set"]
    g = report["guarded"]
    lines = [
        f"ranker {report['ranker']}: {s['memories']} memories, {s['users']} users, "
        f"{s['queries']} queries",
        f"guarded ({g['queries']} queries, paraphrase and cross_language excluded): "
        f"recall@{report['k']} {_fmt(g['recall@5']).strip()}  MRR {_fmt(g['mrr']).strip()}  "
        f"empty-result precision {_fmt(g['empty_precision']).strip()} "
        f"({g['no_match']} no-match queries)  scope leaks {g['leaks']}",
        f"all ({report['all']['queries']} queries): recall@{report['k']} "
        f"{_fmt(report['all']['recall@5']).strip()}  MRR {_fmt(report['all']['mrr']).strip()}",
        "",
        f"{'kind':<14}{'queries':>8}{'answer':>8}{'recall@5':>10}{'MRR':>8}"
        f"{'no-match':>10}{'empty':>8}{'leaks':>7}",
    ]
    for kind, k in report["per_kind"].items():
        lines.append(
            f"{kind:<14}{k['queries']:>8}{k['answerable']:>8}{_fmt(k['recall@5']):>10}"
            f"{_fmt(k['mrr']):>8}{k['no_match']:>10}{_fmt(k['empty_precision']):>8}"
            f"{k['leaks']:>7}"
        )
    failures = report["failures"]
    lines += ["", f"queries not perfect: {len(failures)}"]
    for f in failures:
        option = f" [category={f['category']}]" if "category" in f else ""
        lines.append(
            f"  {f['id']} {f['kind']:<12} {f['user']}@{f['workspace']} {f['query']!r}{option}"
        )
        lines.append(f"      expected {f['expected']}  returned {f['returned']}")
        if f["leaks"]:
            lines.append(f"      LEAKED {f['leaks']}")
    return "\n".join(lines)


def render_side_by_side(reports: Mapping[str, Mapping[str, Any]], part: str = "") -> str:
    """Lexical and hybrid per query kind, one line each (of one half of the queries if given)."""
    lexical, hybrid = reports["lexical"], reports["hybrid"]
    if part:
        lexical, hybrid = lexical["halves"][part], hybrid["halves"][part]
    lines = [
        f"{'kind':<15}{'queries':>8}   {'lexical R@5':>11}{'MRR':>7}{'empty':>7}"
        f"   {'hybrid R@5':>10}{'MRR':>7}{'empty':>7}"
    ]
    rows = [("all", lexical["all"], hybrid["all"])]
    rows += [(k, v, hybrid["per_kind"][k]) for k, v in lexical["per_kind"].items()]
    for kind, low, high in rows:
        lines.append(
            f"{kind:<15}{low['queries']:>8}   {_fmt(low['recall@5']):>11}{_fmt(low['mrr']):>7}"
            f"{_fmt(low['empty_precision']):>7}   {_fmt(high['recall@5']):>10}"
            f"{_fmt(high['mrr']):>7}{_fmt(high['empty_precision']):>7}"
        )
    return "\n".join(lines)
