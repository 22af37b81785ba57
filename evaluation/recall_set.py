"""The issue-15 recall set: its folder, splits, kinds and languages, loaded and validated.

The set is tests/retrieval/recall_set/ (memories_*.jsonl, queries_*.jsonl; format in that
folder's check_set.py, which validates it first).
"""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from evaluation.baselines import texts_of, visible_sets
from retrieval.vectors.service import passage_text

__all__ = ["KINDS", "LANGS", "REPO_ROOT", "SET_DIR", "SPLITS", "K", "RecallSet"]

REPO_ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
SET_DIR: Final = REPO_ROOT / "tests" / "retrieval" / "recall_set"
K: Final = 5
SPLITS: Final = ("tuning", "validation", "test")
KINDS: Final = ("keyword", "question", "paraphrase", "cross_language", "mixed")
LANGS: Final = ("zh", "en", "mixed")


def _check_set_module(directory: pathlib.Path) -> Any:
    """The set's own validator (tests/retrieval/recall_set/check_set.py), loaded by path."""
    spec = importlib.util.spec_from_file_location("recall_check_set", directory / "check_set.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class RecallSet:
    memories: dict[str, dict[str, Any]]  # label -> row
    queries: list[dict[str, Any]]
    visible: dict[tuple[str, str], list[str]]

    @classmethod
    def load(cls, directory: pathlib.Path, splits: Sequence[str]) -> RecallSet:
        """The queries of `splits` and the memories of their users; refused when invalid."""
        check = _check_set_module(directory)
        problems: list[str] = []
        memories = check.check_memories(
            sorted(directory.glob("memories_*.jsonl")), problems, [], None
        )
        queries = check.check_queries(sorted(directory.glob("queries_*.jsonl")), memories, problems)
        if problems:
            raise SystemExit("the set is invalid (run check_set.py):\n  " + "\n  ".join(problems))
        chosen = [q for q in queries if q["split"] in splits]
        users = {q["user"] for q in chosen}
        kept = {
            label: {k: v for k, v in m.items() if not k.startswith("_")}
            for label, m in memories.items()
            if m["user"] in users
        }
        return cls(kept, chosen, visible_sets(kept, check.visible))

    def texts(self) -> dict[str, str]:
        return texts_of(self.memories.values(), passage_text)
