"""POST /predict_proba and /models/{name}/predict_proba."""

from __future__ import annotations

import pytest

from tests.app.conftest import learn_all


def test_empty_before_any_label(client) -> None:  # type: ignore[no-untyped-def]
    assert client.post("/predict_proba", json={"features": {"a": 1}}).json() == {"probabilities": {}}
    r = client.post("/models/default/predict_proba", json={"instances": [{"a": 1}, {}]})
    assert r.json() == {"probabilities": [{}, {}]}


def test_single_and_batch_shapes(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    p = client.post("/predict_proba", json={"features": stream[0][0]}).json()["probabilities"]
    assert set(p) == {"low", "mid", "high"} and abs(sum(p.values()) - 1) < 1e-12 and min(p.values()) > 0
    ps = client.post("/predict_proba", json={"instances": [x for x, _ in stream[:7]]}).json()["probabilities"]
    assert len(ps) == 7 and all(set(q) == set(p) for q in ps)
    assert ps[0] == pytest.approx(p, abs=1e-12)


def test_missing_and_new_features_are_accepted(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    for x in ({}, {"a": None}, {"never_seen": "v"}, {"a": 1, "colour": "purple"}):
        r = client.post("/predict_proba", json={"features": x})
        assert r.status_code == 200 and len(r.json()["probabilities"]) == 3


@pytest.mark.parametrize("raw, loc", [
    (b'{"features": {"a": NaN}}', ["body", "features", "a"]),
    (b'{"instances": [{"a": 1}, {"a": {"n": 1}}]}', ["body", "instances", 1, "a"]),
    (b'{"instances": []}', ["body", "instances"]),
    (b'{"features": {"a": 1}, "instances": [{"a": 1}]}', ["body"]),
    (b'{"instances": [{"a": 1}], "id": "x"}', ["body"]),
    (b'{}', ["body"]),
    (b'{"features": {"a": 1}, "id": true}', ["body", "id"]),
])
def test_bad_input_is_422_naming_the_field(client, raw, loc) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/predict_proba", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc


def test_batch_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_batch=3) as client:
        r = client.post("/predict_proba", json={"instances": [{"a": 1}] * 4})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "instances"]
