"""/models: create (201/200/409/422), list, read, delete; configs are complete."""

from __future__ import annotations

import json
import sqlite3

import pytest

from app.storage import DB_NAME
from streamtree import ProbabilityTree, decide
from streamtree.metrics import improved_squared_error
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
    assert r.json()["differences"] == {
        "grace_period": {"stored": 50, "requested": 51},
        "smoothing": {"stored": "laplace", "requested": ProbabilityTree().get_config()["smoothing"]},
    }
    assert r.json()["detail"].startswith("A model with this name exists with a different config: grace_period")
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
    for method, path in [
        ("GET", "/models/nope"),
        ("DELETE", "/models/nope"),
        ("POST", "/models/nope/learn"),
        ("POST", "/models/nope/predict_proba"),
        ("GET", "/models/nope/metrics"),
        ("GET", "/models/nope/tree"),
    ]:
        body = (
            {"features": {"a": 1}, "label": "x"}
            if path.endswith("learn")
            else ({"features": {"a": 1}} if method == "POST" else None)
        )
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
    fields = [
        k
        for k, v in client.get("/models/default").json()["config"].items()
        if k != "nominal_features" and (v is None or type(v) in (int, float))
    ]
    assert {"grace_period", "max_depth", "max_nodes", "max_features", "tau", "m", "half_life"} <= set(fields)
    for field in fields:
        for value in (HUGE, -HUGE, 10**400, 2**63):
            r = client.request(
                "PUT", "/models/m", content=f'{{"{field}": {value}}}', headers={"content-type": "application/json"}
            )
            assert r.status_code == 422, (field, value, r.text)
            assert r.json()["detail"][0]["loc"] == ["body", field]
    assert client.get("/models/m").status_code == 404


def test_nominal_features_must_be_a_bounded_list_of_bounded_names(client) -> None:  # type: ignore[no-untyped-def]
    for body, loc in [
        ({"nominal_features": "abc"}, ["body", "nominal_features"]),
        ({"nominal_features": {"a": 1}}, ["body", "nominal_features"]),
        ({"nominal_features": ["a", 1.5]}, ["body", "nominal_features"]),
        ({"nominal_features": [f"f{i}" for i in range(100_000)]}, ["body", "nominal_features"]),
        ({"nominal_features": ["a", "x" * 257]}, ["body", "nominal_features", 1]),
        ({"nominal_features": [HUGE]}, ["body", "nominal_features", 0]),
        ({"nominal_features": ["a", "b"], "max_features": 1}, ["body", "nominal_features"]),
    ]:
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


COSTS = {"act": {"low": 5, "mid": 1, "high": 0}, "wait": {"low": 0, "mid": 1, "high": 8}}


def test_a_cost_matrix_in_the_config_adds_cost_metrics(running) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(300, seed=5)
    with running() as client:
        r = client.put("/models/c", json={"grace_period": 20, "costs": COSTS})
        assert r.status_code == 201
        config = r.json()["config"]
        assert config == ProbabilityTree(grace_period=20).get_config() | {"costs": COSTS}
        assert client.put("/models/c", json=config).status_code == 200  # the complete form is the same config
        assert client.put("/models/c", json={"grace_period": 20}).status_code == 409  # without costs: another
        learn_all(client, events, "/models/c/learn", batch=40)
        metrics = client.get("/models/c/metrics").json()
        assert "improved_squared_error" not in client.get("/models/default/metrics").json()["all"]
        assert client.put("/models/plain", json={"costs": None}).json()["config"] == ProbabilityTree().get_config()
    fresh = ProbabilityTree(grace_period=20)
    errors, costs = [], []
    for x, y in events:
        p = fresh.predict_proba_one(x)
        fresh.learn_one(x, y)
        if p:
            errors.append(improved_squared_error(p, y, COSTS))
            costs.append(COSTS[decide(p, COSTS).decision][y])
    a = metrics["all"]
    assert a["costed"] == len(errors) == 299
    assert a["improved_squared_error"] == pytest.approx(sum(errors) / len(errors), rel=1e-9)
    assert a["decision_cost"] == pytest.approx(sum(costs) / len(costs), rel=1e-12)
    assert 0 < a["improved_squared_error"] < 1
    with running() as client:  # the config and the metrics survive a restart
        assert client.get("/models/c").json()["config"]["costs"] == COSTS
        assert client.get("/models/c/metrics").json() == metrics


@pytest.mark.parametrize(
    "costs, loc",
    [
        ({}, ["body", "costs"]),
        ("act", ["body", "costs"]),
        ({"act": {}}, ["body", "costs", "act"]),
        ({"act": {"low": "1"}}, ["body", "costs", "act", "low"]),
        ({"act": {"low": 10**400}}, ["body", "costs", "act", "low"]),
        ({f"d{i}": {"low": 1} for i in range(101)}, ["body", "costs"]),
    ],
)
def test_a_bad_cost_matrix_is_422_naming_costs(client, costs, loc) -> None:  # type: ignore[no-untyped-def]
    r = client.request(
        "PUT", "/models/c", content=json.dumps({"costs": costs}), headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert client.get("/models/c").status_code == 404


def test_costs_are_stored_as_the_floats_the_metrics_use(client) -> None:  # type: ignore[no-untyped-def]
    r = client.put("/models/c", json={"costs": {"act": {"low": 2**64, "mid": 1}, "wait": {"low": 0, "mid": 3}}})
    assert r.status_code == 201, r.text  # an integer beyond 64 bits is a valid cost, and JSON-able as a float
    assert r.json()["config"]["costs"] == {"act": {"low": float(2**64), "mid": 1.0}, "wait": {"low": 0.0, "mid": 3.0}}


@pytest.mark.parametrize(
    "config, loc, words",
    [
        ({"estimator": "forest", "n_trees": 1_000}, ["body", "n_trees"], ["100", "max_trees", "1,000"]),
        ({"estimator": "forest", "n_trees": 101}, ["body", "n_trees"], ["100", "max_trees", "101"]),
        ({"max_nodes": 10_000_000}, ["body", "max_nodes"], ["1,000,000", "max_tree_nodes", "10,000,000"]),
        ({"max_features": 1_000_000}, ["body", "max_features"], ["10,000", "max_model_features", "1,000,000"]),
        (
            {"estimator": "forest", "n_trees": 3, "tree": {"max_nodes": 2_000_000}},
            ["body", "tree", "max_nodes"],
            ["1,000,000", "max_tree_nodes", "2,000,000"],
        ),
    ],
)
def test_sizes_over_the_operators_bounds_are_422_naming_parameter_bound_and_value(client, config, loc, words) -> None:  # type: ignore[no-untyped-def]
    r = client.put("/models/big", json=config)
    assert r.status_code == 422, r.text
    error = r.json()["detail"][0]
    assert error["loc"] == loc and error["type"] == "over_limit", error
    assert all(w in error["msg"] for w in words), error["msg"]
    assert client.get("/models/big").status_code == 404


def test_the_memory_budget_and_category_bound_are_bounded_too(client) -> None:  # type: ignore[no-untyped-def]
    defaults = client.get("/models/default").json()["config"]
    for name, value, setting in [
        ("max_bytes", 2**40, "max_tree_bytes"),
        ("max_bytes", None, "max_tree_bytes"),
        ("max_categories", 10**6, "max_model_categories"),
        ("max_categories", None, "max_model_categories"),
    ]:
        if name not in defaults:  # a library without the parameter
            continue
        for config, loc in [
            ({name: value}, ["body", name]),
            ({"estimator": "forest", "n_trees": 2, "tree": {name: value}}, ["body", "tree", name]),
        ]:
            r = client.put("/models/big", json=config)
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, r.text
            assert setting in r.json()["detail"][0]["msg"]


def test_bounds_are_settings_and_the_defaults_fit(running) -> None:  # type: ignore[no-untyped-def]
    with running() as client:
        r = client.put("/models/forest", json={"estimator": "forest", "n_trees": 100})
        assert r.status_code == 201, r.text  # the largest forest, the library's tree defaults
    with running(max_trees=5, max_tree_nodes=500) as client:
        assert (
            client.put("/models/f5", json={"estimator": "forest", "n_trees": 5, "tree": {"max_nodes": 500}}).status_code
            == 201
        )
        r = client.put("/models/f6", json={"estimator": "forest", "n_trees": 6})
        assert r.status_code == 422 and "max_trees" in r.text
        r = client.put("/models/t", json={})  # the library's default max_nodes (20,000) is over 500
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "max_nodes"]


def test_a_store_failure_on_create_or_delete_is_503_and_changes_nothing(client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # both were a text/plain 500; the delete had dropped the model from memory, not the store
    # (then 404 to learns, 409 to a PUT of it, 404 to a DELETE)
    from app.storage import StorageError

    store = client.app.state.node.registry.db.store

    def failing(*args: object) -> None:
        raise StorageError("OperationalError: the connection was lost")

    learn_all(client, make_stream(20), path="/models/default/learn")
    with monkeypatch.context() as patched:
        patched.setattr(store, "create_model", failing)
        r = client.put("/models/m1", json={"grace_period": 50})
        assert (r.status_code, r.json()) == (
            503,
            {"detail": "The store failed; the model was not created or deleted: retry shortly."},
        )
        patched.setattr(store, "delete_model", failing)
        r = client.delete("/models/default")
        assert r.status_code == 503 and "not created or deleted" in r.json()["detail"]
    assert client.get("/models/default").json()["seq"] == 20  # still served, as stored
    assert client.post("/learn", json={"features": {"a": 1.0}, "label": "x"}).json()["seq"] == 21
    assert client.put("/models/m1", json={"grace_period": 50}).status_code == 201
    assert client.delete("/models/m1").status_code in (200, 204)


def test_a_create_whose_row_was_stored_is_finished_by_the_same_put(client) -> None:  # type: ignore[no-untyped-def]
    # an earlier PUT stored the model, then failed before hosting it: the same PUT hosts it
    # (it was a 409 "exists with a different config", untrue); another config is still a 409
    from app.registry import Registry

    registry = client.app.state.node.registry
    full, text = Registry.build_config(registry, {"grace_period": 50})
    registry.db.store.create_model("m2", text)
    r = client.put("/models/m2", json={"grace_period": 50})
    assert r.status_code == 201 and r.json()["config"] == full
    registry.db.store.create_model("m3", text)
    r = client.put("/models/m3", json={"grace_period": 51})
    assert r.status_code == 409 and "grace_period differs" in r.json()["detail"]
    # the 409 could not be resolved: m3 was not hosted, so GET and DELETE said 404
    assert client.get("/models/m3").json()["config"]["grace_period"] == 50
    assert client.delete("/models/m3").status_code == 204
    assert client.put("/models/m3", json={"grace_period": 51}).status_code == 201


def test_a_create_whose_store_fails_after_its_row_is_undone_so_the_503_is_true(client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the row was stored, the read after it failed: 503 "not created", yet the model was in
    # the store, not hosted (404 to GET and DELETE, 409 to another config) and came back at a restart
    from app.storage import StorageError

    store = client.app.state.node.registry.db.store
    real = store.models
    calls = []

    def fails_once() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("OperationalError: database is locked")
        return real()

    with monkeypatch.context() as patched:
        patched.setattr(store, "models", fails_once)
        r = client.put("/models/x", json={"grace_period": 50})
        assert r.status_code == 503 and "not created" in r.json()["detail"]
    assert "x" not in [m.name for m in store.models()]  # not in the store either
    assert client.get("/models/x").status_code == 404
    assert client.put("/models/x", json={"grace_period": 60}).status_code == 201


def test_an_unexpected_error_is_a_json_500(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # it was Starlette's text/plain "Internal Server Error", which clients cannot read as ours
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.registry import Registry
    from app.settings import Settings

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a defect")

    with TestClient(create_app(Settings(data_dir=tmp_path)), raise_server_exceptions=False) as c:
        monkeypatch.setattr(Registry, "create", broken)
        r = c.put("/models/m1", json={})
        assert (r.status_code, r.json()) == (500, {"detail": "Internal server error."})


def test_a_fork_whose_source_is_deleted_during_its_put_names_the_source(client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the router saw the source, the registry (after a DELETE held its lock) did not: a bare
    # 404 "Model not found." read as if the fork itself were missing
    registry = client.app.state.node.registry
    real_get = registry.get
    monkeypatch.setattr(registry, "get", lambda name: object() if name == "gone" else real_get(name))
    r = client.put("/models/f", json={"config": {}, "from": "gone"})
    assert (r.status_code, r.json()) == (404, {"detail": "Model 'gone' not found (body.from)."})


def test_a_models_labels_are_its_probability_keys_exact_however_large(client) -> None:  # type: ignore[no-untyped-def]
    # the dashboard showed summary.classes through JSON numbers: 2**53 and 2**53 + 1 as one label
    labels = [2**53, 2**53 + 1, 2**63 - 1, -(2**63)]
    events = [{"features": {"a": float(i)}, "label": y} for i, y in enumerate(labels)]
    assert client.post("/learn", json={"events": events}).status_code == 200
    info = client.get("/models/default").json()
    assert info["labels"] == [str(y) for y in info["summary"]["classes"]] == [str(y) for y in labels]
    keys = client.post("/predict_proba", json={"features": {"a": 1.0}}).json()["probabilities"]
    assert sorted(keys) == sorted(info["labels"])
    assert client.get("/models").json()["models"][0]["labels"] == info["labels"]
