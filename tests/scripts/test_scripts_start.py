"""Every script under scripts/ starts (`--help`): a module it imports was not renamed away.

The benchmarks and evaluations run rarely and by hand; a layout change once left bench_search
importing modules that no longer existed, which nothing else noticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "scripts").glob("*.py") if not p.name.startswith("_"))


def test_there_are_scripts() -> None:
    assert len(SCRIPTS) >= 8


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_starts(script: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # as the scripts' usage lines run them
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
