"""/models/{name}/metrics (prequential), /tree and /explain."""

from __future__ import annotations

import math

import pytest

from app.scoring import EPS
from streamtree import ProbabilityTree
from tests.app.conftest import learn_all


def test_prequential_metrics_match_a_by_hand_test_then_train(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(metrics_window=50) as client:
        learn_all(client, stream[:150], batch=7)
        for x, y in stream[150:]:
            client.post("/learn", json={"features": x, "label": y})
        m = client.get("/models/default/metrics").json()
    fresh = ProbabilityTree()
    ll, br, correct, n = [], [], [], 0
    for x, y in stream:
        p = fresh.predict_proba_one(x)
        fresh.learn_one(x, y)
        if not p:
            continue
        n += 1
        ll.append(-math.log(max(p.get(y, 0.0), EPS)))
        br.append(sum((q - (c == y)) ** 2 for c, q in p.items()) + (0.0 if y in p else 1.0))
        correct.append(max(p, key=p.__getitem__) == y)
    assert m["seq"] == 300 and m["unscored"] == 1
    assert m["all"]["n"] == n == 299
    assert m["all"]["log_loss"] == pytest.approx(sum(ll) / n, rel=1e-12)
    assert m["all"]["brier"] == pytest.approx(sum(br) / n, rel=1e-12)
    assert m["all"]["accuracy"] == pytest.approx(sum(correct) / n)
    assert m["recent"]["n"] == 50 and m["recent"]["window"] == 50
    assert m["recent"]["log_loss"] == pytest.approx(sum(ll[-50:]) / 50, rel=1e-12)
    bins = m["all"]["reliability"]
    assert len(bins) == 10 and sum(b["count"] for b in bins) == n
    assert 0 <= m["all"]["ece"] <= 1


def test_metrics_before_any_event(client) -> None:  # type: ignore[no-untyped-def]
    m = client.get("/models/default/metrics").json()
    assert m["all"]["n"] == 0 and m["all"]["log_loss"] is None and m["unscored"] == 0


def test_tree_and_explain_match_the_library(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    fresh = ProbabilityTree()
    for x, y in stream:
        fresh.learn_one(x, y)
    x = stream[3][0]
    assert client.post("/models/default/explain", json={"features": x}).json() == fresh.explain_one(x)
    assert client.get("/models/default/tree").json() == fresh.tree_
    r = client.post("/models/default/explain", json={"features": {"a": [1]}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "features", "a"]


def test_metrics_history_route(running, stream) -> None:  # type: ignore[no-untyped-def]
    """Points every history_every events, ``after`` filters, a bad ``after`` is a 422 naming it."""
    with running(history_every=40) as client:
        learn_all(client, stream[:200], batch=50)
        history = client.get("/models/default/metrics/history").json()
        assert set(history) == {"points", "drifts"}
        assert [p["seq"] for p in history["points"]] == [40, 80, 120, 160, 200]
        point = history["points"][-1]
        recent = client.get("/models/default/metrics").json()["recent"]
        assert {k: point[k] for k in ("n", "log_loss", "brier", "accuracy", "ece", "reliability")} == {
            k: recent[k] for k in ("n", "log_loss", "brier", "accuracy", "ece", "reliability")
        }
        assert set(point) == {"seq", "time", "events_per_s", "n", "log_loss", "brier", "accuracy", "ece", "reliability"}
        after = client.get("/models/default/metrics/history", params={"after": 120}).json()
        assert [p["seq"] for p in after["points"]] == [160, 200]
        for bad in ("-1", "x", "1.5"):
            r = client.get("/models/default/metrics/history", params={"after": bad})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "after"], bad
        assert client.get("/models/nope/metrics/history").status_code == 404


@pytest.mark.parametrize("labels", [(True, False), (0, 1)])
def test_explain_and_tree_of_a_model_with_boolean_or_integer_labels(client, labels) -> None:  # type: ignore[no-untyped-def]
    # orjson refused non-string keys: the explanation of such a model was a 500
    events = [{"features": {"a": float(i)}, "label": labels[i % 2]} for i in range(60)]
    assert client.post("/learn", json={"events": events}).status_code == 200
    explained = client.post("/models/default/explain", json={"features": {"a": 3.0}})
    assert explained.status_code == 200
    keys = {"true", "false"} if labels[0] is True else {"0", "1"}
    assert set(explained.json()["proba"]) == keys
    proba = client.post("/predict_proba", json={"features": {"a": 3.0}}).json()["probabilities"]
    assert explained.json()["proba"] == proba
    assert client.get("/models/default/tree").status_code == 200
