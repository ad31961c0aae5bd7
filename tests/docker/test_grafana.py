"""The Grafana board and the compose file: every query names metrics ``/metrics`` exposes,
every panel uses the provisioned Prometheus, compose provisions both, and its instances share
one PostgreSQL behind HAProxy."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.app.conftest import learn_all, make_stream

DOCKER = Path(__file__).resolve().parents[2] / "docker"
BOARD = DOCKER / "grafana" / "dashboards" / "streamtree.json"

# PromQL words that are not metric names
_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    "and",
    "or",
    "unless",
    "inf",
    "nan",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or Grafana's ``label_values(metric, label)``) reads.

    Strings, label matchers, range selectors and ``by (...)``-style label lists are removed;
    what is left that is neither a function (followed by ``(``), a keyword nor a number is a
    metric name.
    """
    label_values = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*(?:\{[^}]*\})?\s*,\s*\w+\s*\)\s*", expr)
    if label_values:
        return {label_values.group(1)}
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][\w:]*", text):
        rest = text[m.end() :].lstrip()
        if rest.startswith("(") or m.group().lower() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def test_metric_names_parser() -> None:
    assert metric_names('histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{x=~"$m"}[$__rate_interval])))') == {
        "a_bucket"
    }
    assert metric_names("rate(a_sum[5m]) / rate(a_count[5m])") == {"a_sum", "a_count"}
    assert metric_names('changes(b_total{model=~"$model"}[1m]) > 0') == {"b_total"}
    assert metric_names("label_values(c_seq, model)") == {"c_seq"}
    assert metric_names("sum without (x) (d) or on (y) e offset 5m") == {"d", "e"}


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, expr)`` for every query of the board: panels, annotations, template variables."""

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(board["panels"]):
        for t in p.get("targets", []):
            yield f"panel {p['title']!r} {t['refId']}", t["expr"]
    for a in board["annotations"]["list"]:
        if "expr" in a:
            yield f"annotation {a['name']!r}", a["expr"]
    for v in board["templating"]["list"]:
        q = v.get("query")
        if v.get("type") == "query":
            yield f"variable {v['name']!r}", q["query"] if isinstance(q, dict) else q


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name ``/metrics`` exposes once a model learned, predicted and snapshotted."""
    import warnings

    from app.main import create_app
    from app.settings import Settings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    settings = Settings(data_dir=tmp_path_factory.mktemp("grafana") / "data", snapshot_every=100)
    with TestClient(create_app(settings)) as client:
        events = make_stream(300)
        learn_all(client, events, batch=50)
        client.post("/predict_proba", json={"features": events[0][0]})
        text = client.get("/metrics").text
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_query_uses_metrics_the_service_exposes(exposed: set[str]) -> None:
    board = json.loads(BOARD.read_text())
    used: set[str] = set()
    found = list(queries(board))
    assert len(found) >= 15
    for where, expr in found:
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= exposed, f"{where}: {sorted(names - exposed)} not exposed by /metrics"
        used |= names
    # what the board is for: requests, latency, learning, commits, quality, calibration, drift
    assert {
        "streamtree_http_requests_total",
        "streamtree_http_request_duration_seconds_bucket",
        "streamtree_events_learned_total",
        "streamtree_commit_duration_seconds_bucket",
        "streamtree_model_log_loss",
        "streamtree_model_ece",
        "streamtree_model_brier",
        "streamtree_model_accuracy",
        "streamtree_model_drift_detections_total",
        "streamtree_model_drift_swaps_total",
    } <= used


def test_every_panel_uses_the_provisioned_prometheus() -> None:
    board = json.loads(BOARD.read_text())
    datasources = yaml.safe_load((DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    for p in board["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == source["uid"], p["title"]
        assert all(t["datasource"]["uid"] == source["uid"] for t in p["targets"]), p["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) and board["uid"] == "streamtree"


def test_compose_runs_prometheus_and_grafana_with_the_board() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert {"streamtree-1", "prometheus", "grafana"} <= set(services)
    mounts = {s: [v.split(":") for v in services[s].get("volumes", [])] for s in services}
    for service, volumes in mounts.items():
        for source, *_ in volumes:
            if source.startswith("."):
                assert (DOCKER / source).exists(), f"{service}: {source} missing"
    prometheus = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    (job,) = prometheus["scrape_configs"]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == [
        f"{name}:8000" for name in sorted(services) if name.startswith("streamtree-")
    ]
    grafana_mounts = dict((target, source) for source, target, *_ in mounts["grafana"])
    provider = yaml.safe_load((DOCKER / "grafana" / "provisioning" / "dashboards" / "streamtree.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert (
        grafana_mounts[path] == "./grafana/dashboards"
        and grafana_mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    )
    assert all(p.startswith("127.0.0.1:") for s in services.values() for p in s.get("ports", []))


def test_compose_runs_instances_on_one_postgresql_behind_haproxy() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    instances = sorted(name for name in services if name.startswith("streamtree-"))
    assert len(instances) == 3, "one writer and two replicas"
    urls = {services[name]["environment"]["STREAMTREE_DATABASE_URL"] for name in instances}
    assert len(urls) == 1 and "@postgres:5432/" in urls.pop()
    for name in instances:
        env = services[name]["environment"]
        assert services[name]["hostname"] == name and env["STREAMTREE_ADVERTISE_URL"] == f"http://{name}:8000"
        assert "ports" not in services[name], "instances are reached through the load balancer only"
    assert services["streamtree-1"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    config = (DOCKER / "haproxy.cfg").read_text()
    servers = re.findall(r"^\s*server (\S+) (\S+)$", config, flags=re.M)
    assert servers == [(name, f"{name}:8000") for name in instances]
    assert "option httpchk GET /health" in config
    assert any(v.split(":")[0] == "./haproxy.cfg" for v in services["haproxy"]["volumes"])
    assert services["haproxy"]["ports"] == ["127.0.0.1:8000:8000"]


def test_haproxy_accepts_its_config() -> None:
    """``haproxy -c`` on the compose file's config (Debian's haproxy; skipped where it is not installed)."""
    import shutil
    import subprocess

    exe = shutil.which("haproxy")
    if exe is None:
        pytest.skip("haproxy is not installed")
    result = subprocess.run([exe, "-c", "-f", str(DOCKER / "haproxy.cfg")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
