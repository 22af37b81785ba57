"""The recall report as text (`render`), as scripts/eval_recall.py prints it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.recall_set import KINDS, K
from retrieval.fusion import THRESHOLD

__all__ = ["render"]


def _f(value: float | None) -> str:
    return "    -" if value is None else f"{value:5.3f}"


def render(report: Mapping[str, Any], show_misses: Sequence[str]) -> str:
    s = report["set"]
    lines = [
        f"set: {s['memories']} memories of {s['users']} users, {s['queries']} queries "
        f"({', '.join(s['splits'])}); written in {report['load_seconds']['write']} s, settled "
        f"(projections and every vector) {report['load_seconds']['settle']} s later",
    ]
    kinds = "".join(f"{k[:10]:>11}" for k in KINDS)
    for split, results in report["splits"].items():
        n = results["hybrid"]["all"]
        lines += [
            "",
            f"== {split}: {n['queries']} queries, {n['answerable']} answerable, "
            f"{n['unrelated']} unrelated",
            f"{'':<8}{'R@5':>7}{'MRR':>7}{'unrel→∅':>9}   R@5 by kind:{kinds}"
            f"{'p50 ms':>9}{'p95 ms':>8}",
        ]
        for name, r in results.items():
            per_kind = "".join(f"{_f(r['per_kind'][k]['recall@5']):>11}" for k in KINDS)
            timing = r.get("search_ms")
            lines.append(
                f"{name:<8}{_f(r['all']['recall@5']):>7}{_f(r['all']['mrr']):>7}"
                f"{_f(r['all']['unrelated_empty']):>9}   {'':12}{per_kind}"
                + (f"{timing['p50']:>9}{timing['p95']:>8}" if timing else "")
            )
        lines.append(f"{'':<8}MRR by kind:{''.join(f'{k[:10]:>11}' for k in KINDS)}")
        for name, r in results.items():
            per_kind = "".join(f"{_f(r['per_kind'][k]['mrr']):>11}" for k in KINDS)
            lines.append(f"{name:<8}{'':12}{per_kind}")
        lines.append(f"{'':<8}by query language (R@5 / MRR / unrelated→∅):")
        for name, r in results.items():
            cells = "   ".join(
                f"{lang} {_f(v['recall@5'])}/{_f(v['mrr'])}/{_f(v['unrelated_empty'])}"
                for lang, v in r["per_lang"].items()
            )
            lines.append(f"{name:<8}{cells}")
        cal = results["hybrid"]["calibration"]
        lines.append(
            f"hybrid relevance: ECE {cal['ece']} (top {K} items); curve (relevance, share"
            f" answering, n): {cal['curve']}"
        )
        lines.append(
            f"trade-off (default min_relevance {THRESHOLD:g}): min_relevance R@5 MRR unrel→∅"
        )
        for t in results["hybrid"]["tradeoff"]:
            lines.append(
                f"  {t['min_relevance']:<6g}{_f(t['recall@5']):>7}{_f(t['mrr']):>7}"
                f"{_f(t['unrelated_empty']):>7}"
            )
        if split in show_misses:
            misses = results["hybrid"]["misses"]
            lines.append(f"hybrid misses ({len(misses)}):")
            for m in misses:
                lines.append(f"  {m['id']} {m['kind']:<14} {m['where']} {m['query']!r}")
                lines.append(f"      expected {m['expected']}")
                lines.append(f"      hybrid   {m['returned']}")
                lines.append(f"      dense    {m['dense']}")
    return "\n".join(lines)
