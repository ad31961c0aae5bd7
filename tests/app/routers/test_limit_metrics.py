"""GET /metrics exports the growth limits a model met (issue 32): memory, examples whose value
went to a feature's 'other' code, trees stopped by their byte budget."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.app.conftest import learn_all, make_stream


def test_other_values_memory_and_budget_stops_are_exported(client) -> None:  # type: ignore[no-untyped-def]
    events = [({**x, "order_id": f"order-{i}"}, y) for i, (x, y) in enumerate(make_stream(1200, seed=3))]
    assert client.put("/models/ids", json={"max_categories": 20, "max_bytes": 2**17}).status_code == 201
    learn_all(client, events, path="/models/ids/learn", batch=400)
    summary = client.get("/models/ids").json()["summary"]
    assert summary["other_values"] == {"order_id": 1180} and summary["growth_stop"] == "max_bytes"
    assert any("order_id" in line for line in summary["notes"])
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(client.get("/metrics").text)
        for s in f.samples
    }
    assert samples[("streamtree_model_other_values", (("model", "ids"),))] == 1180
    assert samples[("streamtree_model_budget_stops", (("model", "ids"),))] == 1
    assert samples[("streamtree_model_memory_bytes", (("model", "ids"),))] == summary["memory_bytes"]
    assert samples[("streamtree_model_other_values", (("model", "default"),))] == 0
