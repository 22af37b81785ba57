"""deploy/monitoring/ through Prometheus's own checker: the alert rules and the scrape
configuration are valid, and each alert fires (and stays quiet) on the synthetic series of
alerts_test.yml. Runs wherever `promtool` is installed (Debian: apt-get install prometheus);
skipped without it, except in CI (`CI` set, .ci/run installs it), where a missing one fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"

if shutil.which("promtool") is None and not os.environ.get("CI"):
    pytest.skip("no promtool (apt-get install prometheus)", allow_module_level=True)


def promtool(*arguments: str) -> str:
    done = subprocess.run(
        ["promtool", *arguments], cwd=MONITORING, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_alert_rules_are_valid() -> None:
    groups = yaml.safe_load((MONITORING / "alerts.yml").read_text(encoding="utf-8"))["groups"]
    rules = sum(len(group["rules"]) for group in groups)
    assert f"SUCCESS: {rules} rules found" in promtool("check", "rules", "alerts.yml")


def test_the_prometheus_configuration_is_valid_with_its_rules() -> None:
    checked = promtool("check", "config", "prometheus.yml")
    assert "prometheus.yml is valid" in checked and "SUCCESS: 1 rule files found" in checked


def test_each_alert_fires_on_its_synthetic_series() -> None:
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml")
