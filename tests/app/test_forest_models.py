"""The service hosts forests: one config names the estimator, and the log, snapshots,
restarts, metrics, explain and the tree view work as they do for a tree."""

from __future__ import annotations

import pytest

from streamtree import ProbabilityForest
from tests.app.conftest import learn_all, make_stream, same_predictions

FOREST = {"estimator": "forest", "n_trees": 4, "method": "bt+", "seed": 3, "tree": {"grace_period": 20}}


def test_a_forest_model_serves_exactly_the_library_forest_and_survives_restarts(running) -> None:  # type: ignore[no-untyped-def]
    events = make_stream(400)
    expected = ProbabilityForest(n_trees=4, method="bt+", seed=3, tree={"grace_period": 20})
    for x, y in events:
        expected.learn_one(x, y)
    with running() as client:
        r = client.put("/models/f", json=FOREST)
        assert r.status_code == 201, r.text
        config = r.json()["config"]
        assert config["estimator"] == "forest" and config["tree"]["grace_period"] == 20
        assert "seed" not in config["tree"] and config["seed"] == 3 and config["weighted"] is True
        assert client.put("/models/f", json=config).status_code == 200  # the complete config is the same model
        assert client.put("/models/f", json=FOREST | {"n_trees": 5}).status_code == 409
        assert learn_all(client, events[:250], "/models/f/learn") == 250
    with running(snapshot_every=100) as client:  # replay after a restart
        learn_all(client, events[250:], "/models/f/learn", batch=30)
        assert same_predictions(client, expected, "f")
        summary = client.get("/models/f").json()["summary"]
        assert summary["n_trees"] == 4 and len(summary["members"]) == 4
        assert summary["n_examples"] == 400 and summary["n_nodes"] == expected.n_nodes
    with running() as client:  # from the snapshot taken at shutdown
        assert same_predictions(client, expected, "f")
        explained = client.post("/models/f/explain", json={"features": events[0][0]}).json()
        assert len(explained["members"]) == 4
        assert sum(m["share"] for m in explained["members"]) == pytest.approx(1.0)
        assert len(client.get("/models/f/tree").json()["members"]) == 4
        metrics = client.get("/models/f/metrics").json()
        assert metrics["seq"] == 400 and metrics["all"]["n"] > 0
        assert 'streamtree_model_nodes{model="f"}' in client.get("/metrics").text


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"estimator": "bush"}, ["body", "estimator"]),
        ({"estimator": "forest", "n_trees": 0}, ["body", "n_trees"]),
        ({"estimator": "forest", "method": "rf"}, ["body", "method"]),
        ({"estimator": "forest", "grace_period": 5}, ["body", "grace_period"]),
        ({"estimator": "forest", "tree": {"delta": 3}}, ["body", "tree", "delta"]),
        ({"estimator": "forest", "tree": {"seed": 1}}, ["body", "tree", "seed"]),
        ({"estimator": "forest", "tree": "abc"}, ["body", "tree"]),
        (
            {"estimator": "forest", "tree": {"nominal_features": ["a", "x" * 257]}},
            ["body", "tree", "nominal_features", 1],
        ),
        ({"estimator": "forest", "n_trees": 2**70}, ["body", "n_trees"]),
        ({"estimator": "forest", "weighted": "yes"}, ["body", "weighted"]),
    ],
)
def test_bad_forest_configs_are_422_naming_the_field(client, body, loc) -> None:  # type: ignore[no-untyped-def]
    r = client.put("/models/g", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert client.get("/models/g").status_code == 404


def test_a_forest_with_variants_is_created_and_a_bad_variant_is_422_at_its_index(client) -> None:  # type: ignore[no-untyped-def]
    variants = [{"linear": False}, {"grace_period": 5}]
    r = client.put("/models/v", json={"estimator": "forest", "n_trees": 3, "variants": variants})
    assert r.status_code in (200, 201), r.text
    assert r.json()["config"]["variants"] == variants
    r = client.put("/models/w", json={"estimator": "forest", "variants": [{}, {"linear": "no"}]})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "variants", 1, "linear"]
    assert client.get("/models/w").status_code == 404
