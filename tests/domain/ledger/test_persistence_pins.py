"""Every test the persistence package cites as pinning a library internal exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import domain.ledger.persistence as persistence

HERE = Path(__file__).parent


def test_every_pinning_test_named_in_the_persistence_docstring_exists() -> None:
    cited = re.findall(r"(test_\w+\.py)::(test_\w+)", persistence.__doc__ or "")
    assert len(cited) >= 20
    missing = []
    for file, name in cited:
        path = HERE / file
        tree = ast.parse(path.read_text()) if path.exists() else ast.Module([], [])
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if name not in names:
            missing.append(f"{file}::{name}")
    assert missing == []
