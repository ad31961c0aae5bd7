"""GET /metrics: Prometheus text format."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from tests.app.conftest import learn_all, make_stream


def test_requests_latencies_events_and_model_size(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:120], batch=40)
    client.post("/predict_proba", json={"features": stream[0][0]})
    client.get("/models/nope")
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(r.text)
        for s in f.samples
    }
    assert (
        samples[("streamtree_http_requests_total", (("method", "POST"), ("route", "/learn"), ("status", "200")))] == 3
    )
    assert (
        samples[("streamtree_http_requests_total", (("method", "GET"), ("route", "/models/{name}"), ("status", "404")))]
        == 1
    )
    assert (
        samples[("streamtree_http_request_duration_seconds_count", (("method", "POST"), ("route", "/predict_proba")))]
        == 1
    )
    assert samples[("streamtree_events_learned_total", (("model", "default"),))] == 120
    assert samples[("streamtree_model_examples", (("model", "default"),))] == 120
    assert samples[("streamtree_model_seq", (("model", "default"),))] == 120
    assert samples[("streamtree_model_nodes", (("model", "default"),))] >= 1
    assert samples[("streamtree_commit_group_events_sum", ())] == 120


def test_drift_detections_and_swaps_are_exported(client) -> None:  # type: ignore[no-untyped-def]
    """After an abrupt change the model summary and the Prometheus counters show it."""
    events = make_stream(3000, seed=1)
    swapped = {"low": "high", "high": "low", "mid": "mid"}
    flipped = events[:1500] + [(x, swapped[y]) for x, y in events[1500:]]
    assert client.put("/models/m", json={"half_life": None}).status_code == 201
    learn_all(client, flipped, path="/models/m/learn", batch=500)
    drift = client.get("/models/m").json()["summary"]["drift"]
    assert drift["n_detections"] >= 1 and drift["n_swaps"] >= 1
    assert any(e["event"] == "swap" and e["at"] > 1500 for e in drift["events"])
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
    }
    assert samples[("streamtree_model_drift_detections_total", (("model", "m"),))] == drift["n_detections"]
    assert samples[("streamtree_model_drift_swaps_total", (("model", "m"),))] == drift["n_swaps"]
    assert samples[("streamtree_model_drift_detections_total", (("model", "default"),))] == 0
    assert ("streamtree_model_drift_background", (("model", "m"),)) in samples


def test_window_metrics_per_model(client, stream) -> None:  # type: ignore[no-untyped-def]
    """Log loss, Brier, accuracy and ECE of the recent window, as /models/{name}/metrics has them."""
    assert client.put("/models/empty", json={}).status_code == 201
    learn_all(client, stream[:200], batch=50)
    recent = client.get("/models/default/metrics").json()["recent"]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
    }
    for key, name in [
        ("n", "window_events"),
        ("log_loss", "log_loss"),
        ("brier", "brier"),
        ("accuracy", "accuracy"),
        ("ece", "ece"),
    ]:
        assert samples[(f"streamtree_model_{name}", (("model", "default"),))] == recent[key]
        assert (f"streamtree_model_{name}", (("model", "empty"),)) not in samples or name == "window_events"


def test_cost_metrics_per_model_with_a_cost_matrix(client, stream) -> None:  # type: ignore[no-untyped-def]
    costs = {"act": {"low": 5, "mid": 1, "high": 0}, "wait": {"low": 0, "mid": 1, "high": 8}}
    assert client.put("/models/c", json={"costs": costs}).status_code == 201
    learn_all(client, stream[:100], path="/models/c/learn", batch=50)
    learn_all(client, stream[:100], batch=50)
    recent = client.get("/models/c/metrics").json()["recent"]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
    }
    for key in ("improved_squared_error", "decision_cost"):
        assert samples[(f"streamtree_model_{key}", (("model", "c"),))] == recent[key]
        assert (f"streamtree_model_{key}", (("model", "default"),)) not in samples  # no cost matrix


def test_snapshot_size_gauge(running, stream) -> None:  # type: ignore[no-untyped-def]
    """The newest snapshot's size is a gauge (the soak watches it stay flat): 0 before the first."""

    def gauge(client) -> float:  # type: ignore[no-untyped-def]
        text = client.get("/metrics").text
        return next(
            s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "streamtree_model_snapshot_bytes" and s.labels == {"model": "default"}
        )

    with running(snapshot_every=100) as client:
        assert gauge(client) == 0
        learn_all(client, stream[:250], batch=50)
        deadline = time.monotonic() + 60  # snapshots are written in the background
        while (size := gauge(client)) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert size > 1000
        summary = client.get("/models/default").json()["summary"]
        assert size < 10 * summary["memory_bytes"] + 100_000  # a snapshot is about the arrays it holds
