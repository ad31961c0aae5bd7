"""ProbabilityTree: the estimator contract, run on every smoothing, plus river's own checks."""

from __future__ import annotations

import copy
import itertools
import math
import pickle
import random
from typing import Any

import numpy as np
import pandas as pd
import pytest
from river import checks, datasets
from river.datasets import synth

from streamtree import ConfigError, FormatError, InputError, ProbabilityTree
from streamtree.persistence import FORMAT_VERSION
from tests.batches import learn_in_batches

SMOOTHINGS = ["hgs", "mbranch", "mestimate", "laplace", "mle"]


def stream(n: int = 600, seed: int = 0) -> list[tuple[dict, object]]:
    """Mixed numeric and nominal features, a class that appears late, missing values."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.random(), rng.random()
        colour = rng.choice(["red", "green", "blue"])
        y = "pos" if a + (0.3 if colour == "red" else 0.0) > 0.7 else "neg"
        if i > n // 2 and b > 0.85:
            y = "rare"
        x = {"a": a, "b": b, "colour": colour}
        if rng.random() < 0.1:
            x["a"] = None
        if i > n // 3:
            x["late"] = rng.randint(0, 5)
        out.append((x, y))
    return out


def fitted(smoothing: str = "hgs", n: int = 600, **kwargs) -> ProbabilityTree:
    model = ProbabilityTree(smoothing=smoothing, grace_period=20, **kwargs)
    for x, y in stream(n):
        model.learn_one(x, y)
    return model


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.usefixtures("frozen_heap")
def test_river_checks(smoothing: str) -> None:
    model = ProbabilityTree(smoothing=smoothing)
    for check in checks.yield_checks(model):
        check(model.clone())  # each check gets a fresh model, as river's own test suite does


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_probabilities_are_strictly_positive_and_sum_to_one(smoothing: str) -> None:
    model = ProbabilityTree(smoothing=smoothing, grace_period=20)
    assert model.predict_proba_one({"a": 1.0}) == {}
    seen: set = set()
    for x, y in stream(600):
        proba = model.predict_proba_one(x)
        assert set(proba) == seen
        if proba:
            assert all(p > 0 for p in proba.values())
            assert math.isclose(sum(proba.values()), 1.0, rel_tol=1e-12)
        model.learn_one(x, y)
        seen.add(y)
    assert model.n_nodes > 1, "the stream is learnable: the tree should have split"


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_learn_many_equals_learn_one(smoothing: str) -> None:
    data = stream(700, seed=3)
    one = ProbabilityTree(smoothing=smoothing, grace_period=20, refit_every=37)
    for x, y in data:
        one.learn_one(x, y)
    # batch boundaries unrelated to grace or refits
    many = learn_in_batches(ProbabilityTree(smoothing=smoothing, grace_period=20, refit_every=37), data, [97])
    assert one.to_bytes() == many.to_bytes()


def test_learn_many_accepts_dataframes_and_arrays() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((400, 3))
    y = (X[:, 0] > 0.5).astype(int)
    from_array = ProbabilityTree(grace_period=20)
    from_array.learn_many(X, y)
    from_frame = ProbabilityTree(grace_period=20)
    from_frame.learn_many(pd.DataFrame(X), pd.Series(y))
    by_one = ProbabilityTree(grace_period=20)
    for row, label in zip(X, y):
        by_one.learn_one(dict(enumerate(row)), label)
    assert from_array.to_bytes() == from_frame.to_bytes() == by_one.to_bytes()
    assert from_array.n_nodes > 1


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_a_copy_learns_and_predicts_on_exactly_as_the_original(copier: Any) -> None:
    """A copy leaves the compiled handles of the arrays behind and makes its own: it shares
    no array with the original, and goes on bit for bit."""
    model = fitted(n=300)
    model.predict_proba_one(stream(1)[0][0])  # the original holds handles to copy
    twin = copier(model)
    for x, y in stream(700)[300:]:
        assert twin.predict_proba_one(x) == model.predict_proba_one(x)
        model.learn_one(x, y)
        twin.learn_one(x, y)
    assert twin.to_bytes() == model.to_bytes()
    assert not np.shares_memory(twin.counts_, model.counts_)


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_predict_proba_many_matches_predict_proba_one(smoothing: str) -> None:
    model = fitted(smoothing)
    xs = [x for x, _ in stream(200, seed=9)] + [{}, {"a": None, "colour": "purple"}, {"b": "oops"}]
    table = model.predict_proba_many(pd.DataFrame(xs))
    assert list(table.columns) == model.classes_
    for i, x in enumerate(xs):
        one = model.predict_proba_one(x)
        for label, p in one.items():
            assert table.iloc[i][label] == pytest.approx(p, rel=1e-9, abs=1e-15)
    np.testing.assert_allclose(model.predict_proba(xs), table.to_numpy())


def test_same_stream_same_model_bit_for_bit() -> None:
    assert fitted().to_bytes() == fitted().to_bytes()


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_round_trip_is_bit_identical_and_keeps_learning(smoothing: str) -> None:
    model = fitted(smoothing, n=400)
    copy = ProbabilityTree.from_bytes(model.to_bytes())
    probe = [x for x, _ in stream(100, seed=4)]
    assert [model.predict_proba_one(x) for x in probe] == [copy.predict_proba_one(x) for x in probe]
    for x, y in stream(300, seed=5):
        model.learn_one(x, y)
        copy.learn_one(x, y)
    assert model.to_bytes() == copy.to_bytes()
    assert [model.predict_proba_one(x) for x in probe] == [copy.predict_proba_one(x) for x in probe]


def test_corrupt_bytes_raise_format_error() -> None:
    data = fitted(n=100).to_bytes()
    with pytest.raises(FormatError, match="magic"):
        ProbabilityTree.from_bytes(b"not a model")
    with pytest.raises(FormatError):
        ProbabilityTree.from_bytes(data[:40])
    newer = data.replace(f'"version": {FORMAT_VERSION}'.encode(), b'"version": 9', 1)
    with pytest.raises(FormatError, match="version 9"):
        ProbabilityTree.from_bytes(newer)


def test_bad_input_raises_and_changes_nothing() -> None:
    model = fitted(n=300)
    before = model.to_bytes()
    with pytest.raises(InputError, match="'a'") as err:
        model.learn_one({"a": "text", "b": 0.5}, "pos")  # 'a' is numeric in this model
    assert err.value.field == "a"
    with pytest.raises(InputError, match="'b'"):
        model.learn_one({"b": float("inf")}, "pos")
    with pytest.raises(InputError, match="'nested'"):
        model.learn_one({"nested": {"x": 1}}, "pos")
    with pytest.raises(InputError, match="label") as err:
        model.learn_one({"a": 0.5}, 1.5)
    assert err.value.field == "label"
    with pytest.raises(InputError, match="mapping"):
        model.learn_one([1, 2], "pos")  # type: ignore[arg-type]
    for learn in (lambda x: model.learn_one(x, "pos"), lambda x: model.learn_many([{"a": 0.5}, x], ["pos", "pos"])):
        with pytest.raises(InputError, match="'b' must be a finite number") as err:  # beyond float's range
            learn({"a": 0.5, "b": 10**400})
        assert err.value.field == "b"
    assert model.to_bytes() == before
    # prediction treats unusable values as missing rather than failing
    assert set(model.predict_proba_one({"a": "text", "b": [1]})) == set(model.classes_)
    missing = model.predict_proba([{"a": 0.5}])
    np.testing.assert_array_equal(model.predict_proba([{"a": 0.5, "b": 10**400}]), missing)
    assert list(model.predict_proba_one({"a": 0.5, "b": -(10**400)}).values()) == missing[0].tolist()


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"delta": 1.5}, "delta"),
        ({"grace_period": 0}, "grace_period"),
        ({"smoothing": "kneser-ney"}, "smoothing"),
        ({"max_depth": 0}, "max_depth"),
        ({"split_criterion": "entropy"}, "split_criterion"),
        ({"leaf_init": "copy"}, "leaf_init"),
        ({"refit_every": 2.5}, "refit_every"),
        ({"tau_scale": "relative"}, "tau_scale"),
    ],
)
def test_invalid_config_names_the_parameter(kwargs: dict, param: str) -> None:
    with pytest.raises(ConfigError, match=f"'{param}'") as err:
        ProbabilityTree(**kwargs)
    assert err.value.param == param
    assert "Got" in str(err.value)


def test_unknown_parameter_is_rejected() -> None:
    with pytest.raises(TypeError):
        ProbabilityTree(grace=3)  # type: ignore[call-arg]


def test_config_round_trips_and_rebuilds_the_same_model() -> None:
    model = fitted(n=300, split_criterion="gini", nominal_features=("late",))
    again = ProbabilityTree(**model.get_config())
    for x, y in stream(300):
        again.learn_one(x, y)
    assert again.to_bytes() == model.to_bytes()


def _first_split_at(n_classes: int, tau_scale: str) -> int | None:
    """The example after which a tree first splits on a stream of random labels and features,
    where every candidate's merit is small and close to the others' (a tie)."""
    rng = random.Random(n_classes)
    model = ProbabilityTree(tau_scale=tau_scale, linear=False)
    for i in range(200):
        model.learn_one({"a": rng.random(), "b": rng.random()}, rng.randrange(n_classes))
        if model.n_nodes > 1:
            return i + 1
    return None


@pytest.mark.parametrize("n_classes", [2, 5, 10])
def test_ties_break_at_the_first_attempt_whatever_the_class_count(n_classes: int) -> None:
    """``tau`` relative to the criterion's range (the default): a leaf breaks a tie at its first
    attempt (30 examples) with 2, 5 or 10 classes; an absolute ``tau=0.2`` (river's rule) waits
    for 109 examples with 5 classes and 222 with 10, as ``log2 K`` grows the bound."""
    assert _first_split_at(n_classes, "range") == 30
    absolute = _first_split_at(n_classes, "absolute")
    assert absolute == 30 if n_classes == 2 else (absolute is None or absolute >= 109)


@pytest.mark.parametrize("criterion", ["info_gain", "gini", "hellinger"])
def test_every_criterion_grows_a_useful_tree(criterion: str) -> None:
    model = ProbabilityTree(split_criterion=criterion, grace_period=50)
    data = list(synth.Agrawal(classification_function=0, seed=2).take(3000))
    hits = 0
    for i, (x, y) in enumerate(data):
        if i >= 2000:
            hits += model.predict_one(x) == y
        model.learn_one(x, y)
    assert model.n_nodes > 1
    assert hits / 1000 > 0.9


def test_max_nodes_stops_growth_cleanly() -> None:
    model = ProbabilityTree(grace_period=10, max_nodes=7)
    for x, y in itertools.islice(synth.RandomRBF(seed_model=1, seed_sample=1, n_classes=4), 4000):
        model.learn_one(x, y)
    assert model.n_nodes <= 7
    assert model.growth_stopped
    assert model.summary()["n_examples"] == 4000
    before = model.counts_[0].sum()
    model.learn_one({0: 0.1}, 0)
    assert model.counts_[0].sum() == before + 1


def test_pure_leaves_do_not_split_on_rounding_noise() -> None:
    """A leaf that has seen one class has nothing to gain from a split (every merit is 0, or
    +-1e-15 of rounding): the tree of a threshold concept stays small instead of splitting its
    pure leaves without end."""
    rng = random.Random(3)
    model = ProbabilityTree(grace_period=50)
    for _ in range(20_000):
        x = {"a": rng.random(), "b": rng.random(), "c": rng.gauss(0.0, 1.0)}
        model.learn_one(x, x["a"] > 0.5)
    assert model.n_nodes <= 15


def test_max_depth_is_respected() -> None:
    model = ProbabilityTree(grace_period=10, max_depth=2)
    for x, y in itertools.islice(synth.RandomRBF(seed_model=1, seed_sample=1, n_classes=4), 3000):
        model.learn_one(x, y)
    assert model.summary()["depth"] == 2


def test_every_node_on_the_path_counts_the_example() -> None:
    model = fitted(n=500, leaf_init="zero", half_life=None)
    counts = model.counts_[: model.n_nodes].sum(axis=1)
    for node in range(1, model.n_nodes):
        parent = model.parent_[node]
        assert counts[parent] >= counts[node]
    assert counts[0] == model.n_examples == 500


def test_missing_split_feature_stops_at_the_internal_node() -> None:
    model = fitted(n=600)
    root_split = model.tree_["split"][0]
    assert root_split is not None
    explained = model.explain_one({})
    assert explained["leaf"] == 0 and explained["stopped_early"]
    assert model.predict_proba_one({}) == pytest.approx(explained["proba"])


def test_explain_one_shares_reconstruct_the_probability() -> None:
    model = fitted(n=600)
    x = stream(1, seed=11)[0][0]
    explained = model.explain_one(x)
    path = explained["path"]
    assert [n["node"] for n in path][0] == 0
    shares = [n["share"] for n in path]
    assert sum(shares) + explained["prior_share"] == pytest.approx(1.0)
    k = len(model.classes_)
    for label in model.classes_:
        mixture = sum(n["share"] * n["mle"][label] for n in path if n["mle"]) + explained["prior_share"] / k
        assert mixture == pytest.approx(explained["smoothed"][label])
    # served: the linear component's pool of these probabilities (no naive-Bayes factor)
    assert explained["proba"] == explained["linear"]["pooled"] and explained["naive_bayes"] is None


def test_summary_and_tree_are_plain_data() -> None:
    import json

    model = fitted(n=400)
    summary = model.summary()
    assert summary["n_nodes"] == model.n_nodes and summary["n_examples"] == 400
    assert set(summary["classes"]) == {"pos", "neg", "rare"}
    tree = model.tree_
    json.dumps(tree)
    json.dumps(summary)
    json.dumps(model.explain_one({"a": 0.2, "colour": "red"}))
    assert len(tree["parent"]) == model.n_nodes


def test_nominal_features_declared_numbers_split_by_equality() -> None:
    model = ProbabilityTree(grace_period=20, nominal_features=("code",))
    rng = random.Random(1)
    for _ in range(800):
        code = rng.randint(0, 3)
        model.learn_one({"code": code}, code == 2)
    assert model.tree_["split"][0] == {"feature": "code", "operator": "==", "value": 2}
    assert model.predict_proba_one({"code": 2})[True] > 0.9


def test_real_dataset_log_loss_beats_laplace() -> None:
    """HGS's reason to exist, on a real stream: better probabilities than Laplace smoothing.

    The smoother's own probabilities, the counts alone (``linear=False``): with the linear
    component on, its pool is fitted on the served loss and narrows the difference between
    smoothers to under 1% either way on this stream."""
    from river import metrics

    losses = {}
    for smoothing in ("hgs", "laplace"):
        model = ProbabilityTree(smoothing=smoothing, linear=False)
        metric = metrics.CrossEntropy()
        for x, y in datasets.ImageSegments():
            metric.update(y, model.predict_proba_one(x))
            model.learn_one(x, y)
        losses[smoothing] = metric.get()
    assert losses["hgs"] < losses["laplace"]


def test_half_life_forgets_an_old_concept() -> None:
    """After the concept flips, a forgetting tree follows the new one; counts stay consistent."""
    rng = random.Random(2)
    stream_ = [
        ({"a": v, "b": rng.random()}, (v > 0.5) != (i >= 3000)) for i, v in enumerate(rng.random() for _ in range(5000))
    ]
    # the counts alone: the linear component's regression follows the flip for both
    plain = ProbabilityTree(refit_every=200, drift_delta=None, linear=False)
    forgetting = ProbabilityTree(refit_every=200, half_life=500, drift_delta=None, linear=False)
    for model in (plain, forgetting):
        for x, y in stream_:
            model.learn_one(x, y)
    probe = {"a": 0.9, "b": 0.5}
    assert forgetting.predict_proba_one(probe)[False] > plain.predict_proba_one(probe)[False]
    assert forgetting.predict_proba_one(probe)[False] > 0.8
    assert forgetting.counts_[0].sum() < 0.5 * plain.counts_[0].sum()


def test_half_life_keeps_learn_many_exact_and_round_trips() -> None:
    data = stream(700, seed=8)
    one = ProbabilityTree(grace_period=20, refit_every=50, half_life=300)
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityTree(grace_period=20, refit_every=50, half_life=300), data, [130])
    assert one.to_bytes() == many.to_bytes()
    assert ProbabilityTree.from_bytes(one.to_bytes()).to_bytes() == one.to_bytes()


def test_summary_and_tree_are_the_same_after_a_reload() -> None:
    """The service compares summaries across restarts: they must not depend on capacity."""
    model = fitted(n=300)
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.summary() == model.summary()
    assert again.tree_ == model.tree_
    fresh = ProbabilityTree()
    fresh.learn_one({"a": 1.0}, "x")
    assert fresh.tree_["alpha"] == [1.0]  # the root's weight exists before any prediction


def test_max_features_refuses_what_would_pass_it_and_changes_nothing() -> None:
    pd = pytest.importorskip("pandas")
    model = ProbabilityTree(max_features=3)
    model.learn_one({"a": 1.0, "b": "x"}, "p")
    before = model.to_bytes()
    with pytest.raises(InputError, match="max_features=3"):
        model.learn_one({"c": 1.0, "d": 2.0}, "q")
    with pytest.raises(InputError, match="max_features=3"):
        model.learn_many([{"a": 1.0, "c": 1.0}, {"d": 1.0}], ["p", "q"])
    with pytest.raises(InputError, match="max_features=3"):
        model.learn_many(pd.DataFrame({"c": [1.0, 2.0], "d": [1.0, 2.0]}), ["p", "q"])
    assert model.to_bytes() == before
    model.learn_many([{"a": 1.0, "c": 1.0}, {"b": "y"}], ["p", "q"])  # exactly at the limit
    again = ProbabilityTree.from_bytes(model.to_bytes())
    with pytest.raises(InputError, match="max_features=3"):
        again.learn_one({"e": 1.0}, "p")


@pytest.mark.parametrize("config", [{}, {"grace_period": 5, "tau": 0.6, "linear": False}])
def test_the_order_of_an_examples_features_changes_no_split(config: dict) -> None:
    """Two features that always agree tie on every split; the tie goes to the feature's key
    (a hash of its name), not to the column it arrived in, so the same examples with their
    features in another order grow the same tree (river's ``check_shuffle_features_no_impact``
    for eager growth, where ties are broken on a handful of examples)."""
    rng = random.Random(3)
    rows = []
    for _ in range(400):
        a = rng.random()
        rows.append(({"a": a, "copy": a, "noise": rng.random()}, a > 0.4))
    trees = [ProbabilityTree(**config), ProbabilityTree(**config)]
    for x, y in rows:
        trees[0].learn_one(x, y)
        trees[1].learn_one(dict(reversed(list(x.items()))), y)
    splits = [[p["split"] for p in t.explain_one(rows[0][0])["path"][:-1]] for t in trees]
    assert splits[0] == splits[1] and splits[0]
    probe = {"a": 0.41, "copy": 0.41, "noise": 0.5}
    assert trees[0].predict_proba_one(probe) == pytest.approx(trees[1].predict_proba_one(probe), rel=1e-12)
