"""docker-compose.yml's `monitoring` profile and deploy/monitoring/ fit together: the profile's
services, the files they mount, the scrape target, the Grafana datasource the dashboard uses,
the dashboard's layout, each alert's labels, annotations, runbook section and unit test; and
the image the compose file builds holds every package of the project. Read as YAML and JSON
(no Docker needed)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def compose() -> dict[str, Any]:
    services: dict[str, Any] = load(ROOT / "docker-compose.yml")["services"]
    return services


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path → source of each volume of a service (bind mounts as repo paths)."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        found[target] = source
    return found


def bound(service: dict[str, Any], container_path: str) -> Path:
    """The repository file or folder a service sees at `container_path` through a bind mount."""
    for target, source in mounts(service).items():
        if container_path == target or container_path.startswith(target + "/"):
            assert source.startswith("./"), f"{container_path} is in volume {source}"
            return ROOT / source / container_path[len(target) :].lstrip("/")
    raise AssertionError(f"nothing mounted at {container_path}")


def test_the_monitoring_profile_adds_prometheus_and_grafana_only() -> None:
    services = compose()
    profiled = {name for name, s in services.items() if "monitoring" in s.get("profiles", [])}
    assert profiled == {"prometheus", "grafana"}
    assert all(services[name]["profiles"] == ["monitoring"] for name in profiled)
    declared = set(load(ROOT / "docker-compose.yml")["volumes"])
    for name in profiled:
        named = {s for s in mounts(services[name]).values() if not s.startswith("./")}
        assert named <= declared
        assert all(port.startswith("127.0.0.1:") for port in services[name]["ports"])


def test_prometheus_reads_the_mounted_configuration_and_rules_and_scrapes_the_api() -> None:
    services = compose()
    prometheus = services["prometheus"]
    [flag] = [a for a in prometheus["command"] if a.startswith("--config.file=")]
    config_path = flag.split("=", 1)[1]
    config_file = bound(prometheus, config_path)
    assert config_file == MONITORING / "prometheus.yml" and config_file.is_file()
    config = load(config_file)
    for rules in config["rule_files"]:
        assert bound(prometheus, str(Path(config_path).parent / rules)).is_file()
    [job] = config["scrape_configs"]
    [target] = [t for group in job["static_configs"] for t in group["targets"]]
    host, port = target.split(":")
    assert job["metrics_path"] == "/metrics" and host in services
    command = services[host]["command"]
    assert command[command.index("--port") + 1] == port
    assert job["job_name"] == "memledger"  # the alert MemledgerDown selects up{job="memledger"}


def test_grafana_provisions_the_datasource_and_the_dashboard_it_uses() -> None:
    services = compose()
    grafana = services["grafana"]
    provisioning = bound(grafana, "/etc/grafana/provisioning")
    [source] = load(provisioning / "datasources" / "prometheus.yml")["datasources"]
    url = re.fullmatch(r"http://([\w-]+):(\d+)", source["url"])
    assert url is not None and url.group(1) in services and url.group(1) == "prometheus"
    [provider] = load(provisioning / "dashboards" / "memledger.yml")["providers"]
    folder = bound(grafana, provider["options"]["path"])
    boards = sorted(folder.glob("*.json"))
    assert boards == [MONITORING / "grafana" / "dashboards" / "memledger.json"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert bound(grafana, home) == boards[0]
    board = json.loads(boards[0].read_text(encoding="utf-8"))
    panels = board["panels"]
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == source["uid"], panel["title"]
        assert all(t["datasource"]["uid"] == source["uid"] for t in panel["targets"])
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]) > 0


def test_the_dashboard_panels_have_unique_ids_and_fit_the_grid() -> None:
    board = json.loads((MONITORING / "grafana" / "dashboards" / "memledger.json").read_text())
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


def github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_each_alert_is_labelled_annotated_documented_and_unit_tested() -> None:
    rules = [rule for group in load(MONITORING / "alerts.yml")["groups"] for rule in group["rules"]]
    operations = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    anchors = {
        github_anchor(line.lstrip("#")) for line in operations.splitlines() if line.startswith("#")
    }
    tested = load(MONITORING / "alerts_test.yml")["tests"]
    firing = {
        check["alertname"]
        for test in tested
        for check in test["alert_rule_test"]
        if check.get("exp_alerts")
    }
    for rule in rules:
        name = rule["alert"]
        assert re.fullmatch(r"\d+m", rule["for"]), name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        page, anchor = rule["annotations"]["runbook"].split("#")
        assert page == "docs/operations.md" and anchor == name.lower() and anchor in anchors
        assert name in firing, f"{name} has no test where it fires"


def test_the_image_holds_every_package_of_the_project() -> None:
    """The compose file's api and worker run this image: a package not copied is missing."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {
        pattern.rstrip("*")
        for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    copied = set(re.findall(r"^COPY (\w+) \./\1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert packages <= copied


def test_the_citus_profile_is_a_coordinator_and_two_workers_ready_for_shard_moves() -> None:
    services = compose()
    profiled = {name for name, s in services.items() if "citus" in s.get("profiles", [])}
    assert profiled == {"citus-coordinator", "citus-worker-1", "citus-worker-2", "citus-setup"}
    for name in profiled - {"citus-setup"}:
        assert "wal_level=logical" in services[name]["command"]  # citus_rebalance_start
        assert services[name]["image"].startswith("${CITUS_IMAGE:-citusdata/citus:13.")
    published = [p for name in profiled for p in services[name].get("ports", [])]
    assert published == ["127.0.0.1:5433:5432"]  # the coordinator alone, on loopback
    declared = set(load(ROOT / "docker-compose.yml")["volumes"])
    for name in profiled:
        assert {s for s in mounts(services[name]).values()} <= declared
    setup = " ".join(services["citus-setup"]["command"])
    assert "citus_add_node('citus-worker-1'" in setup and "citus_add_node('citus-worker-2'" in setup
