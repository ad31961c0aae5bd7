"""POST /decide and /models/{name}/decide: least expected cost, single and batch, errors naming costs."""

from __future__ import annotations

import pytest

from streamtree import ProbabilityTree, decide
from tests.app.conftest import learn_all

COSTS = {
    "act": {"low": 5, "mid": 1, "high": 0},
    "wait": {"low": 0, "mid": 1, "high": 8},
    "ask": {"low": 2, "mid": 2, "high": 2},
}
PATHS = ["/decide", "/models/default/decide"]


def by_hand(p: dict[str, float]) -> tuple[str, dict[str, float]]:
    expected = {d: sum(p[y] * c[y] for y in p) for d, c in COSTS.items()}
    return min(expected, key=expected.__getitem__), expected


@pytest.mark.parametrize("path", PATHS)
def test_before_any_label_there_is_nothing_to_decide_from(client, path) -> None:  # type: ignore[no-untyped-def]
    for body in ({"features": {"a": 1}, "costs": COSTS}, {"instances": [{"a": 1}], "costs": COSTS}):
        r = client.post(path, json=body)
        assert r.status_code == 409
        assert r.json() == {"detail": "The model has learned no label yet; there are no probabilities to decide from."}


@pytest.mark.parametrize("path", PATHS)
def test_single_decision_is_the_least_expected_cost(client, stream, path) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    for x, _ in stream[:20]:
        r = client.post(path, json={"features": x, "costs": COSTS})
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"decision", "expected_costs", "probabilities", "seq"}
        p = client.post("/predict_proba", json={"features": x}).json()["probabilities"]
        assert body["probabilities"] == p
        decision, expected = by_hand(p)
        assert body["decision"] == decision and list(body["expected_costs"]) == list(COSTS)
        assert body["expected_costs"] == pytest.approx(expected, rel=1e-12)
        assert body == {
            "decision": (d := decide(p, COSTS)).decision,
            "expected_costs": d.expected_costs,
            "probabilities": p,
            "seq": len(stream),
        }


@pytest.mark.parametrize("path", PATHS)
def test_batch_answers_one_entry_per_instance(client, stream, path) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    xs = [x for x, _ in stream[:30]] + [{}, {"never_seen": "v"}]
    r = client.post(path, json={"instances": xs, "costs": COSTS})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"decisions", "expected_costs", "probabilities", "seq"}
    assert len(body["decisions"]) == len(body["expected_costs"]) == len(body["probabilities"]) == len(xs)
    assert body["probabilities"] == client.post("/predict_proba", json={"instances": xs}).json()["probabilities"]
    for i, x in enumerate(xs):
        one = client.post(path, json={"features": x, "costs": COSTS}).json()
        assert body["decisions"][i] == one["decision"] == by_hand(body["probabilities"][i])[0]
        assert body["expected_costs"][i] == pytest.approx(one["expected_costs"], rel=1e-12)
    assert len(set(body["decisions"])) > 1  # the stream has cases for more than one decision


def test_ties_go_to_the_first_decision_in_the_costs(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream)
    same = {"low": 1, "mid": 1, "high": 1}
    assert client.post("/decide", json={"features": {}, "costs": {"b": same, "a": same}}).json()["decision"] == "b"
    r = client.post("/decide", json={"instances": [{}, {"a": 2}], "costs": {"a": same, "b": same}})
    assert r.json()["decisions"] == ["a", "a"]


def test_labels_are_keys_as_in_probabilities(client) -> None:  # type: ignore[no-untyped-def]
    client.put("/models/flags", json={})
    events = [{"features": {"a": i}, "label": i % 3 == 0} for i in range(30)]
    assert client.post("/models/flags/learn", json={"events": events}).status_code == 200
    costs = {"block": {"true": 0, "false": 10}, "allow": {"true": 100, "false": 0}}
    r = client.post("/models/flags/decide", json={"features": {"a": 3}, "costs": costs})
    assert r.status_code == 200 and set(r.json()["probabilities"]) == {"true", "false"}
    r = client.post("/models/flags/decide", json={"features": {"a": 3}, "costs": {"block": {"True": 0, "False": 1}}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "costs", "block"]


@pytest.mark.parametrize(
    "raw, loc",
    [
        (b'{"features": {"a": 1}}', ["body", "costs"]),
        (b'{"features": {"a": 1}, "costs": {}}', ["body", "costs"]),
        (b'{"features": {"a": 1}, "costs": [1]}', ["body", "costs"]),
        (b'{"features": {"a": 1}, "costs": {"act": {}}}', ["body", "costs", "act"]),
        (b'{"features": {"a": 1}, "costs": {"act": 3}}', ["body", "costs", "act"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": "1"}}}', ["body", "costs", "act", "low"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": NaN}}}', ["body", "costs", "act", "low"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": 1e400}}}', ["body", "costs", "act", "low"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": 1e301}}}', ["body", "costs", "act", "low"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": 1' + b"0" * 400 + b"}}}", ["body", "costs", "act", "low"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": true}}}', ["body", "costs", "act", "low"]),
        (
            b'{"features": {"a": 1}, "costs": {"act": {"low": 1, "mid": 1, "high": 1}, "wait": {"low": 1}}}',
            ["body", "costs", "wait"],
        ),  # no cost for the model's labels mid and high
        (b'{"features": {"a": NaN}, "costs": {"act": {"low": 1}}}', ["body", "features", "a"]),
        (b'{"instances": [{"a": 1}, {"a": {"n": 1}}], "costs": {"act": {"low": 1}}}', ["body", "instances", 1, "a"]),
        (b'{"instances": [], "costs": {"act": {"low": 1}}}', ["body", "instances"]),
        (b'{"features": {"a": 1}, "instances": [{"a": 1}], "costs": {"act": {"low": 1}}}', ["body"]),
        (b'{"instances": [{"a": 1}], "id": "x", "costs": {"act": {"low": 1}}}', ["body"]),
        (b'{"features": {"a": 1}, "id": true, "costs": {"act": {"low": 1, "mid": 1, "high": 1}}}', ["body", "id"]),
        (b'{"features": {"a": 1}, "costs": {"act": {"low": 1}}, "extra": 1}', ["body", "extra"]),
    ],
)
@pytest.mark.parametrize("path", PATHS)
def test_bad_input_is_422_naming_the_field(client, stream, raw, loc, path) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc


def test_a_missing_label_is_named_in_the_message(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    r = client.post("/decide", json={"features": {}, "costs": {"act": {"low": 1, "mid": 1}}})
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "costs", "act"] and "'high'" in err["msg"] and err["type"] == "costs_missing_label"


def test_cost_limits(running, stream) -> None:  # type: ignore[no-untyped-def]
    with running(max_batch=2, max_string_length=8, max_labels=3) as client:
        learn_all(client, stream[:50], batch=2)
        three = {"low": 1, "mid": 1, "high": 1}
        for costs, loc in [
            ({f"d{i}": three for i in range(101)}, ["body", "costs"]),
            ({"act": three | {"more": 1}}, ["body", "costs", "act"]),
            ({"x" * 9: three}, ["body", "costs", "x" * 9]),
            ({"act": {"low": 1, "y" * 9: 1}}, ["body", "costs", "act", "y" * 9]),
        ]:
            r = client.post("/decide", json={"features": {}, "costs": costs})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, (costs, r.text)
        r = client.post("/decide", json={"instances": [{}] * 3, "costs": {"act": three}})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "instances"]
        assert (
            client.post("/decide", json={"features": {}, "costs": {f"d{i}": three for i in range(100)}}).json()[
                "decision"
            ]
            == "d0"
        )


def test_body_size_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_body_bytes=1024) as client:
        r = client.post("/decide", json={"features": {"a": 1}, "costs": {f"d{i}": {"low": 1} for i in range(100)}})
        assert r.status_code == 413 and r.json() == {"detail": "Request body is too large."}


def test_unknown_model_is_404(client) -> None:  # type: ignore[no-untyped-def]
    r = client.post("/models/nope/decide", json={"features": {"a": 1}, "costs": COSTS})
    assert r.status_code == 404 and r.json() == {"detail": "Model not found."}
    client.delete("/models/default")
    assert client.post("/decide", json={"features": {"a": 1}, "costs": COSTS}).status_code == 404


KEY = "k" * 16


def test_reads_need_a_key_only_when_reads_are_protected(running, stream) -> None:  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {KEY}"}
    body = {"features": {"a": 1}, "costs": COSTS}
    with running(api_keys=KEY) as client:
        client.post("/learn", json={"events": [{"features": x, "label": y} for x, y in stream[:40]]}, headers=auth)
        assert client.post("/decide", json=body).status_code == 200  # reads are open, as for predict
    with running(api_keys=KEY, protect_reads=True) as client:
        for path in PATHS:
            r = client.post(path, json=body)
            assert r.status_code == 401 and r.json() == {"detail": "Missing bearer token."}
            r = client.post(path, json=body, headers={"Authorization": "Bearer wrong-key-0000"})
            assert r.status_code == 403 and r.json() == {"detail": "Invalid API key."}
            assert client.post(path, json=body, headers=auth).status_code == 200


def test_an_id_labels_the_decided_instance_later(client, stream) -> None:  # type: ignore[no-untyped-def]
    learn_all(client, stream[:50])
    x, y = stream[50]
    incomplete = {"act": {"low": 1}}
    assert client.post("/decide", json={"features": x, "id": "tx-1", "costs": incomplete}).status_code == 422
    assert client.post("/learn", json={"id": "tx-1", "label": y}).status_code == 422  # the refused call kept no id
    assert client.post("/decide", json={"features": x, "id": "tx-1", "costs": COSTS}).status_code == 200
    assert client.post("/decide", json={"features": x, "id": "tx-1", "costs": COSTS}).status_code == 409  # pending
    assert client.post("/learn", json={"id": "tx-1", "label": y}).json()["seq"] == 51
    fresh = ProbabilityTree()
    for xx, yy in stream[:51]:
        fresh.learn_one(xx, yy)
    assert client.post("/predict_proba", json={"features": x}).json()["probabilities"] == fresh.predict_proba_one(x)


def test_openapi_documents_both_routes(client) -> None:  # type: ignore[no-untyped-def]
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/decide", "/models/{name}/decide"):
        op = paths[path]["post"]
        assert "409" in op["responses"] and "422" in op["responses"]
        assert "least expected cost" in op["description"]
