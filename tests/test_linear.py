"""The linear component at the model's level: what it buys, that it changes nothing where it
cannot help, and that the loop's guarantees (batches, reads, persistence, drift) hold with it."""

from __future__ import annotations

import math
import random

import pytest

from streamtree import ProbabilityTree
from tests.batches import learn_in_batches


def linear_stream(n: int, seed: int = 0, flip_at: int | None = None) -> list[tuple[dict, str]]:
    """A noisy linear concept on three numbers, with a nominal feature, missing values, a
    feature that appears late and a third class from the middle on; the concept turns around
    at ``flip_at``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x: dict = {"u": rng.uniform(-1, 1), "v": rng.uniform(-1, 1), "w": rng.uniform(-1, 1), "c": rng.choice("pq")}
        if i > n // 3:
            x["late"] = rng.gauss(0, 1)
        s = 2.0 * x["u"] - 1.5 * x["v"] + 0.5 * x["w"]
        if flip_at is not None and i >= flip_at:
            s = -s
        p = 1.0 / (1.0 + math.exp(-3.0 * s))
        y = "pos" if rng.random() < p else "neg"
        if i > n // 2 and rng.random() < 0.1:
            y = "other"
        if rng.random() < 0.03:
            x[rng.choice(["u", "v", "c"])] = None
        out.append((x, y))
    return out


def prequential_log_loss(model: ProbabilityTree, data: list[tuple[dict, str]]) -> float:
    """Mean log loss of the predictions made before learning each example (a label's first
    example, which no model can predict, not scored)."""
    total, n = 0.0, 0
    for x, y in data:
        proba = model.predict_proba_one(x)
        if y in proba:
            total -= math.log(proba[y])
            n += 1
        model.learn_one(x, y)
    return total / n


def test_a_linear_concept_is_learned_better_with_the_component() -> None:
    data = linear_stream(4000, seed=1)
    plain = prequential_log_loss(ProbabilityTree(linear=False), data)
    linear = ProbabilityTree(linear=True)
    with_component = prequential_log_loss(linear, data)
    assert with_component < 0.9 * plain
    pool = linear.summary()["linear"]
    assert pool["b"] + pool["c"] > 0.2 and 0.0 <= pool["a"] <= 1.0
    explanation = linear.explain_one(data[-1][0])
    explained = explanation["linear"]
    assert set(explained["regression"]) == set(linear.classes_)
    assert math.isclose(sum(explained["regression"].values()), 1.0)
    assert explanation["proba"] == explained["pooled"]  # no naive-Bayes factor: the pool is served
    u = 1.0 - max(explanation["smoothed"].values())
    assert explained["uncertainty"] == pytest.approx(u) and explained["weight"] == pytest.approx(
        pool["b"] + pool["c"] * u
    )
    w = explained["weight"]
    for label in linear.classes_:  # the pool, recomputed from its parts
        expected = explanation["smoothed"][label] ** pool["a"] * explained["regression"][label] ** w
        total = sum(explanation["smoothed"][c] ** pool["a"] * explained["regression"][c] ** w for c in linear.classes_)
        assert math.isclose(explained["pooled"][label], expected / total, rel_tol=1e-9)


def test_without_numeric_features_the_component_changes_nothing() -> None:
    rng = random.Random(3)
    data = []
    for _ in range(1500):
        x = {"a": rng.choice("xyz"), "b": rng.choice("pq")}
        data.append((x, "yes" if (x["a"] == "x") != (rng.random() < 0.1) else "no"))
    with_component, without = ProbabilityTree(linear=True), ProbabilityTree(linear=False)
    for x, y in data:
        assert with_component.predict_proba_one(x) == without.predict_proba_one(x)
        with_component.learn_one(x, y)
        without.learn_one(x, y)
    assert with_component.summary()["linear"] == {"a": 1.0, "b": 0.0, "c": 0.0, "n_scored": 0}


@pytest.mark.parametrize("naive_bayes", [False, True])
def test_batches_give_the_model_learn_one_gives_bit_for_bit(naive_bayes: bool) -> None:
    data = linear_stream(3000, seed=2, flip_at=1500)
    config = {"linear": True, "naive_bayes": naive_bayes, "grace_period": 20, "refit_every": 60}
    one = ProbabilityTree(**config)
    singles = []
    for x, y in data:
        singles.append(one.predict_proba_one(x))
        one.learn_one(x, y)
    assert one.drift_summary()["n_detections"] >= 1  # the flip was detected: the pool was reset
    many = learn_in_batches(ProbabilityTree(**config), data, [1, 7, 250, 33, 1000])
    assert one.to_bytes() == many.to_bytes()
    batch = ProbabilityTree(**config)
    proba = batch.learn_many([x for x, _ in data], [y for _, y in data], return_proba=True)
    for i in range(1, len(data)):  # the prequential predictions are learn_one's
        expected = singles[i]
        assert dict(zip(batch.classes_[: len(expected)], proba[i][: len(expected)].tolist())) == expected
    # and the model too: the loop's learning reuses what it computed for each prediction
    assert batch.to_bytes() == one.to_bytes()
    probe = [x for x, _ in data[-200:]]
    table = one.predict_proba(probe)
    for i, x in enumerate(probe):
        assert table[i].tolist() == list(one.predict_proba_one(x).values())


def test_reads_do_not_write_and_a_saved_model_goes_on_identically() -> None:
    data = linear_stream(2500, seed=4)
    model = ProbabilityTree(linear=True)
    for x, y in data[:2000]:
        model.learn_one(x, y)
    before = model.to_bytes()
    model.predict_proba([x for x, _ in data[2000:]])
    model.explain_one(data[2000][0])
    model.summary()
    assert model.to_bytes() == before
    again = ProbabilityTree.from_bytes(before)
    assert again.get_config()["linear"] is True
    for x, y in data[2000:]:
        assert again.predict_proba_one(x) == model.predict_proba_one(x)
        again.learn_one(x, y)
        model.learn_one(x, y)
    assert again.to_bytes() == model.to_bytes()


def test_a_detected_change_resets_the_pool_to_the_tree_alone() -> None:
    data = linear_stream(6000, seed=5, flip_at=3000)
    model = ProbabilityTree(linear=True)
    detections = 0
    for i, (x, y) in enumerate(data):
        model.learn_one(x, y)
        summary = model.summary()
        if summary["drift"]["n_detections"] > detections:
            detections = summary["drift"]["n_detections"]
            assert i >= 3000
            assert summary["linear"] == {"a": 1.0, "b": 0.0, "c": 0.0, "n_scored": 0}
    assert detections >= 1
    assert model.summary()["linear"]["b"] + model.summary()["linear"]["c"] > 0.0  # refitted on the new concept since


def test_a_batch_learned_while_a_background_tree_is_compared_gives_learn_one_bits() -> None:
    """With a detector this sensitive a background tree is compared over many examples, long
    enough for the pool to refit, so that the tree's own probabilities and the pool's differ
    while the loop serves both trees into the scratch the linear step would otherwise reuse."""
    data = linear_stream(4000, seed=5)
    config = {"drift_delta": 0.9, "drift_patience": 400, "grace_period": 20, "refit_every": 60}
    one = ProbabilityTree(**config)
    for x, y in data:
        one.predict_proba_one(x)
        one.learn_one(x, y)
    assert one.drift_summary()["n_detections"] >= 1
    batch = ProbabilityTree(**config)
    batch.learn_many([x for x, _ in data], [y for _, y in data], return_proba=True)
    assert batch.to_bytes() == one.to_bytes()


@pytest.mark.parametrize("naive_bayes", [False, True])
def test_values_near_the_float_range_never_make_a_probability_nan(naive_bayes: bool) -> None:
    # Their differences and squares overflow: the regression's running scales leave them out
    # (before, the scale went to inf, then NaN, and every prediction after the pool's first
    # refit was NaN).
    rng = random.Random(8)
    model = ProbabilityTree(naive_bayes=naive_bayes)
    for i in range(600):
        v = rng.gauss(0.0, 1.0)
        h = (1e308 if i % 2 else -1.7e308) if i < 150 or i % 97 == 0 else v
        model.learn_one({"h": h, "g": rng.gauss(0.0, 1.0)}, "p" if v > 0 else "q")
        for x in ({"h": h}, {"h": -1e308, "g": 1e300}, {}):
            p = model.predict_proba_one(x)
            assert all(math.isfinite(q) and q > 0.0 for q in p.values()), (i, x, p)
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.predict_proba_one({"h": 1e308}) == model.predict_proba_one({"h": 1e308})
