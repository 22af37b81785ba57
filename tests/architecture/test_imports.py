"""Imports: no module imports itself back, through any chain (typing-only imports too), and
every module's imports stand in its header, not in a second block further down."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = (
    "domain",
    "projections",
    "retrieval",
    "migration",
    "replay",
    "api",
    "evaluation",
    "memledger_client",  # the Python SDK (clients/python)
)


def _cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    found = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                found.append((module, *back))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*_PACKAGES, include_external_packages=False, cache_dir=None)


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_a_cycle_would_be_found() -> None:
    graph = grimp.ImportGraph()
    graph.add_import(importer="a.base", imported="a.tracking")
    graph.add_import(importer="a.tracking", imported="a.base")

    assert _cycles(graph) == [
        ("a.base", "a.tracking", "a.base"),
        ("a.tracking", "a.base", "a.tracking"),
    ]


def _late_import(source: str) -> int | None:
    """The line of the first module-level import that follows other statements (None: none).

    The header may hold the docstring, imports, `if TYPE_CHECKING:` blocks and `try:` blocks
    of imports; imports inside functions (lazy ones) are not module-level.
    """
    seen_code = False
    for index, node in enumerate(ast.parse(source).body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if seen_code:
                return node.lineno
        elif (
            (index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
            or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
            or (
                isinstance(node, ast.Try)
                and all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body)
            )
        ):
            continue
        else:
            seen_code = True
    return None


def test_no_module_has_a_second_import_block() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    late = {}
    for path in listed:
        if (ROOT / path).exists() and (line := _late_import((ROOT / path).read_text("utf-8"))):
            late[path] = line
    assert late == {}


def test_a_second_import_block_is_found() -> None:
    assert _late_import('"""Doc."""\nimport os\n\nX = 1\nimport sys\n') == 5
    assert _late_import("import os\nif TYPE_CHECKING:\n    import sys\nimport re\n") is None
    assert _late_import("import os\n\ndef f():\n    import sys\n") is None
