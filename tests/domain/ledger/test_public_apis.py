"""domain/ledger/persistence uses its libraries (psycopg, psycopg_pool, eventsourcing, json)
through their public APIs only: no private attribute, no private module, no class swap.

A patch release may change any private part; issue 26 asks for none. Reads the source (AST):
- `obj._name` is allowed only for names the package defines itself (its own attributes,
  methods and module globals); dunders are Python's data model, not a library's;
- no assignment to `__class__` (nor `setattr(..., "__class__", ...)`);
- `getattr`/`setattr`/`hasattr` with a private name only for the package's own names;
- imports only from public modules (no `_`-prefixed module part, nor json's and psycopg_pool's
  implementation modules), and no `_`-prefixed name imported from a library;
- none of the CPython json internals the codec once used.
"""

from __future__ import annotations

import ast
from pathlib import Path

import domain.ledger.persistence as persistence

PACKAGE = Path(persistence.__file__).parent
# Implementation modules of the libraries: their names are public, their contents are not.
PRIVATE_MODULES = ("json.encoder", "json.decoder", "json.scanner", "psycopg_pool.pool")
PRIVATE_NAMES = {"c_make_encoder", "scan_once", "make_scanner", "c_scanstring"}


def _modules() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text()) for path in sorted(PACKAGE.glob("*.py"))}


def _own_names(modules: dict[str, ast.Module]) -> set[str]:
    """Every name the package binds: globals, functions, classes, and the attributes its own
    `__init__` methods set (a library's attribute is set in the library's `__init__`)."""
    names: set[str] = set()
    for tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        for init in ast.walk(tree):
            if isinstance(init, ast.FunctionDef) and init.name == "__init__":
                for node in ast.walk(init):
                    if (
                        isinstance(node, ast.Attribute)
                        and isinstance(node.ctx, ast.Store)
                        and isinstance(node.value, ast.Name)
                        and node.value.id == "self"
                    ):
                        names.add(node.attr)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _violations(modules: dict[str, ast.Module]) -> list[str]:
    own = _own_names(modules)
    found: list[str] = []
    for file, tree in modules.items():
        for node in ast.walk(tree):
            where = f"{file}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Attribute):
                if _private(node.attr) and node.attr not in own:
                    found.append(f"{where}: private attribute .{node.attr}")
                if node.attr == "__class__" and isinstance(node.ctx, ast.Store):
                    found.append(f"{where}: __class__ assigned")
                if node.attr in PRIVATE_NAMES:
                    found.append(f"{where}: json internal .{node.attr}")
                if isinstance(node.value, ast.Name) and (
                    f"{node.value.id}.{node.attr}" in PRIVATE_MODULES
                ):
                    found.append(f"{where}: implementation module {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("getattr", "setattr", "hasattr", "delattr"):
                    name = node.args[1] if len(node.args) > 1 else None
                    if isinstance(name, ast.Constant) and isinstance(name.value, str):
                        if (_private(name.value) and name.value not in own) or (
                            name.value == "__class__" and node.func.id != "getattr"
                        ):
                            found.append(f"{where}: {node.func.id}(..., {name.value!r})")
                        if name.value in PRIVATE_NAMES:
                            found.append(f"{where}: json internal {name.value!r}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                modules_named = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for module in modules_named:
                    if module.startswith("domain"):
                        continue
                    if any(_private(part) for part in module.split(".")) or any(
                        module == m or module.startswith(m + ".") for m in PRIVATE_MODULES
                    ):
                        found.append(f"{where}: import from private module {module}")
                if isinstance(node, ast.ImportFrom) and not (node.module or "").startswith(
                    "domain"
                ):
                    for alias in node.names:
                        if _private(alias.name) or alias.name in PRIVATE_NAMES:
                            found.append(f"{where}: private name {alias.name} imported")
    return found


def test_the_persistence_uses_no_private_part_of_its_libraries() -> None:
    assert _violations(_modules()) == []


def test_the_check_finds_each_kind_of_private_use() -> None:
    # The check itself, on code like the pool, factory and codec had before issue 26.
    before = ast.parse(
        "from psycopg_pool.pool import AddConnection\n"
        "import json.encoder\n"
        "def f(self, pool, transcoder):\n"
        "    conn = self._pool.pop()\n"
        "    self._nconns_min = len(self._pool)\n"
        "    self._stats[self._CONNECTIONS_LOST] += 1\n"
        "    pool.__class__ = Lifo\n"
        "    pool._configure = configure\n"
        "    make = getattr(json.encoder, 'c_make_encoder', None)\n"
        "    scan = getattr(transcoder.decoder, 'scan_once', None)\n"
    )
    found = _violations({"before.py": before})
    for expected in (
        "import from private module psycopg_pool.pool",
        "import from private module json.encoder",
        "private attribute ._pool",
        "private attribute ._stats",
        "private attribute ._nconns_min",
        "private attribute ._CONNECTIONS_LOST",
        "__class__ assigned",
        "private attribute ._configure",
        "implementation module json.encoder",
        "json internal 'c_make_encoder'",
        "json internal 'scan_once'",
    ):
        assert any(expected in line for line in found), (expected, found)
