"""The import graph: no module imports itself back, through any chain (typing-only imports too)."""

from __future__ import annotations

import grimp
import pytest

_PACKAGES = ("domain", "projections", "retrieval", "migration", "replay", "api")


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
