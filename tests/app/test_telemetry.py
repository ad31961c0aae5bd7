"""Request metrics are labelled by route template, never by the raw path."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def routes(client) -> set[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    text = client.get("/metrics").text
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"])
        for f in text_string_to_metric_families(text)
        if f.name == "streamtree_http_requests"
        for s in f.samples
        if s.name.endswith("_total")
    }


def test_unmatched_paths_share_one_label(client) -> None:  # type: ignore[no-untyped-def]
    for i in range(5):
        client.get(f"/no/such/path/{i}")
        client.get(f"/models/m{i}")
    seen = routes(client)
    assert ("GET", "unmatched", "404") in seen
    assert ("GET", "/models/{name}", "404") in seen
    assert not any("m1" in r or "/no/" in r for _, r, _ in seen)


def test_deleted_model_series_are_dropped(client) -> None:  # type: ignore[no-untyped-def]
    client.put("/models/gone", json={})
    client.post("/models/gone/learn", json={"features": {"a": 1}, "label": "x"})
    assert 'streamtree_events_learned_total{model="gone"} 1.0' in client.get("/metrics").text
    client.delete("/models/gone")
    text = client.get("/metrics").text
    assert 'model="gone"' not in text
