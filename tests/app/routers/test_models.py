"""/models: create (201/200/409/422), list, read, delete; configs are complete."""

from __future__ import annotations

import json
import sqlite3

from streamtree import ProbabilityTree

from app.storage import DB_NAME

from tests.app.conftest import batch_proba, learn_all, make_stream


def test_default_model_exists_with_library_defaults(client) -> None:  # type: ignore[no-untyped-def]
    r = client.get("/models/default")
    assert r.status_code == 200
    body = r.json()
    assert body["name"] == "default" and body["seq"] == 0
    assert body["config"] == ProbabilityTree().get_config()
    s = body["summary"]
    assert {"n_nodes", "n_leaves", "depth", "n_examples", "classes"} <= set(s)
    assert s["n_examples"] == 0 and s["classes"] == []
    assert [m["name"] for m in client.get("/models").json()["models"]] == ["default"]


def test_put_created_then_same_then_conflict(client) -> None:  # type: ignore[no-untyped-def]
    r = client.put("/models/m1", json={"grace_period": 50, "smoothing": "laplace"})
    assert r.status_code == 201
    config = r.json()["config"]
    assert config["grace_period"] == 50 and config == ProbabilityTree(grace_period=50, smoothing="laplace").get_config()
    assert client.put("/models/m1", json={"grace_period": 50, "smoothing": "laplace"}).status_code == 200
    assert client.put("/models/m1", json=config).status_code == 200  # the complete form is the same config
    r = client.put("/models/m1", json={"grace_period": 51})
    assert r.status_code == 409
    assert r.json() == {"detail": "A model with this name exists with a different config."}
    assert client.put("/models/default", json={}).status_code == 200
    assert [m["name"] for m in client.get("/models").json()["models"]] == ["default", "m1"]


def test_invalid_and_unknown_parameters_are_named(client) -> None:  # type: ignore[no-untyped-def]
    r = client.put("/models/m", json={"delta": 2.0})
    assert r.status_code == 422
    err = r.json()["detail"][0]
    assert err["loc"] == ["body", "delta"] and "delta" in err["msg"]
    r = client.put("/models/m", json={"delta": 0.1, "no_such_option": 1})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "no_such_option"]
    assert client.put("/models/m", json=[1, 2]).status_code == 422
    assert client.get("/models/m").status_code == 404


def test_invalid_name_is_422_and_missing_is_404(client) -> None:  # type: ignore[no-untyped-def]
    assert client.put("/models/bad name!", json={}).status_code == 422
    assert client.put("/models/" + "x" * 65, json={}).status_code == 422
    for method, path in [("GET", "/models/nope"), ("DELETE", "/models/nope"), ("POST", "/models/nope/learn"),
                         ("POST", "/models/nope/predict_proba"), ("GET", "/models/nope/metrics"),
                         ("GET", "/models/nope/tree")]:
        body = {"features": {"a": 1}, "label": "x"} if path.endswith("learn") else (
            {"features": {"a": 1}} if method == "POST" else None)
        r = client.request(method, path, json=body)
        assert r.status_code == 404, path
        assert r.json() == {"detail": "Model not found."}


def test_delete_removes_model_and_its_events(client) -> None:  # type: ignore[no-untyped-def]
    client.put("/models/m", json={})
    learn_all(client, make_stream(20), "/models/m/learn")
    assert client.delete("/models/m").status_code == 204
    assert client.get("/models/m").status_code == 404
    r = client.put("/models/m", json={})
    assert r.status_code == 201 and r.json()["seq"] == 0 and r.json()["summary"]["n_examples"] == 0


def test_config_rebuilds_the_same_model(client) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(400, seed=3)
    client.put("/models/m", json={"grace_period": 20})
    learn_all(client, events, "/models/m/learn")
    config = client.get("/models/m").json()["config"]
    fresh = ProbabilityTree(**config)
    for x, y in events:
        fresh.learn_one(x, y)
    probes = [x for x, _ in make_stream(30, seed=9)]
    served = client.post("/models/m/predict_proba", json={"instances": probes}).json()["probabilities"]
    assert served == batch_proba(fresh, probes)
    for x in probes[:5]:
        one = client.post("/models/m/predict_proba", json={"features": x}).json()["probabilities"]
        assert one == fresh.predict_proba_one(x)
    assert client.get("/models/m").json()["summary"] == fresh.summary()


def test_model_limit(running) -> None:  # type: ignore[no-untyped-def]
    with running(max_models=2) as client:
        assert client.put("/models/a", json={}).status_code == 201
        r = client.put("/models/b", json={})
        assert r.status_code == 409 and r.json() == {"detail": "The model limit is reached."}


HUGE = 2**70


def test_every_config_field_refuses_huge_numbers_with_a_json_422_naming_it(client) -> None:  # type: ignore[no-untyped-def]
    fields = [k for k, v in client.get("/models/default").json()["config"].items() if k != "nominal_features"
              and (v is None or type(v) in (int, float))]
    assert {"grace_period", "max_depth", "max_nodes", "max_features", "tau", "m", "half_life"} <= set(fields)
    for field in fields:
        for value in (HUGE, -HUGE, 10**400, 2**63):
            r = client.request("PUT", "/models/m", content=f'{{"{field}": {value}}}',
                               headers={"content-type": "application/json"})
            assert r.status_code == 422, (field, value, r.text)
            assert r.json()["detail"][0]["loc"] == ["body", field]
    assert client.get("/models/m").status_code == 404


def test_nominal_features_must_be_a_bounded_list_of_bounded_names(client) -> None:  # type: ignore[no-untyped-def]
    for body, loc in [({"nominal_features": "abc"}, ["body", "nominal_features"]),
                      ({"nominal_features": {"a": 1}}, ["body", "nominal_features"]),
                      ({"nominal_features": ["a", 1.5]}, ["body", "nominal_features"]),
                      ({"nominal_features": [f"f{i}" for i in range(100_000)]}, ["body", "nominal_features"]),
                      ({"nominal_features": ["a", "x" * 257]}, ["body", "nominal_features", 1]),
                      ({"nominal_features": [HUGE]}, ["body", "nominal_features", 0]),
                      ({"nominal_features": ["a", "b"], "max_features": 1}, ["body", "nominal_features"])]:
        r = client.put("/models/m", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"][0]["loc"] == loc
    assert client.get("/models/m").status_code == 404
    r = client.put("/models/m", json={"nominal_features": ["a", 7], "max_features": 2})
    assert r.status_code == 201 and r.json()["config"]["nominal_features"] == ["a", 7]


def test_a_config_stored_before_a_parameter_existed_is_completed_on_start(running, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        assert client.put("/models/old", json={"grace_period": 50}).status_code == 201
        learn_all(client, make_stream(40), "/models/old/learn")
    db = sqlite3.connect(tmp_path / "data" / DB_NAME)
    config = ProbabilityTree(grace_period=50).get_config()
    del config["max_features"]  # as stored by a version without max_features
    with db:
        db.execute("UPDATE models SET config = ? WHERE name = 'old'", (json.dumps(config, sort_keys=True),))
        db.execute("DELETE FROM snapshots WHERE model = 'old'")
    db.close()
    with running() as client:
        info = client.get("/models/old").json()
        assert info["config"] == ProbabilityTree(grace_period=50).get_config() and info["seq"] == 40
        assert client.put("/models/old", json={"grace_period": 50}).status_code == 200  # the same config, not a 409
