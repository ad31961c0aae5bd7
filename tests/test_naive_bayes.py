"""The tempered naive-Bayes factor: its maths, its fitted exponent, and the tree using it."""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtree import ConfigError, ProbabilityTree
from tests.batches import learn_in_batches
from tests.reference.naive_bayes import NU, NaiveBayesFactor
from tests.test_tree import stream


def linear_stream(n: int, seed: int = 0) -> list[tuple[dict, object]]:
    """A linear concept over four features (trees need many leaves; naive Bayes does not)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {f"x{i}": rng.random() for i in range(4)}
        label = x["x0"] + x["x1"] + x["x2"] - x["x3"] > 1.0
        out.append((x, label if rng.random() > 0.05 else not label))
    return out


def prequential_log_loss(model: ProbabilityTree, data: list[tuple[dict, object]]) -> float:
    total = 0.0
    for x, y in data:
        proba = model.predict_proba_one(x)
        total += -math.log(proba.get(y, 1e-15)) if proba else math.log(2)
        model.learn_one(x, y)
    return total / len(data)


# -- the factor -----------------------------------------------------------------------------
def test_loglik_is_the_shrunk_gaussian_and_add_one_nominal_model() -> None:
    rng = np.random.default_rng(0)
    values = [rng.normal(0.0, 1.0, 30), rng.normal(2.0, 0.5, 20)]
    colours = [rng.integers(0, 3, 30), rng.integers(0, 3, 20)]
    nb = NaiveBayesFactor()
    nb.resize(n_classes=2, n_numeric=1, n_nominal=1, n_values=3)
    nb.stats.set_shift(0, 0.3)
    for k in (0, 1):
        for v, c in zip(values[k], colours[k]):
            nb.stats.update_one(0, k, [0], [float(v)], [0], [int(c)])
    nb.refresh(2)
    every = np.concatenate(values)
    pooled = every.var(ddof=1)
    x, code = 1.1, 2
    expected = []
    for k in (0, 1):
        v = values[k]
        var = (((v - v.mean()) ** 2).sum() + NU * pooled) / (v.size - 1 + NU)
        gauss = -0.5 * math.log(2 * math.pi * var) - (x - v.mean()) ** 2 / (2 * var)
        nominal = math.log(((colours[k] == code).sum() + 1) / (colours[k].size + 3 + 1))
        expected.append(gauss + nominal)
    assert nb.row_loglik([x], [code], 2) == pytest.approx(expected, rel=1e-9)
    batch = nb.loglik(np.array([[x], [np.nan]]), np.array([[code], [-1]]), 2)
    assert batch[0].tolist() == pytest.approx(expected, rel=1e-9)
    assert batch[1].tolist() == [0.0, 0.0]  # nothing known: no evidence either way


def test_gamma_is_fitted_high_when_the_factor_helps_and_zero_when_it_misleads() -> None:
    rng = np.random.default_rng(1)
    helpful, misleading = NaiveBayesFactor(), NaiveBayesFactor()
    for nb in (helpful, misleading):
        nb.resize(n_classes=2, n_numeric=0, n_nominal=0, n_values=0)
    for _ in range(400):
        y = int(rng.integers(0, 2))
        tree = np.array([0.5, 0.5])
        evidence = [2.0 if k == y else 0.0 for k in (0, 1)]  # points at the right class
        helpful.score(tree, evidence, y)
        misleading.score(np.array([0.9, 0.1]) if y == 0 else np.array([0.1, 0.9]), evidence[::-1], y)
    helpful.fit()
    misleading.fit()
    assert helpful.gamma == 1.0
    assert misleading.gamma == 0.0


def gamma(model: ProbabilityTree) -> float:
    return float(model.summary()["naive_bayes"]["gamma"])


# -- the tree with the factor ---------------------------------------------------------------
def test_the_factor_improves_a_linear_concept() -> None:
    data = linear_stream(6000, seed=2)
    # the factor against the counts alone (the linear component, on by default, does its job too)
    with_factor = prequential_log_loss(ProbabilityTree(naive_bayes=True, linear=False), data)
    without = prequential_log_loss(ProbabilityTree(linear=False), data)
    assert with_factor < 0.95 * without


def test_learn_many_equals_learn_one_with_the_factor() -> None:
    data = stream(1500, seed=4)  # a late class, a late feature, missing values, nominals
    one = ProbabilityTree(naive_bayes=True, grace_period=20, refit_every=60)
    for x, y in data:
        one.learn_one(x, y)
    assert gamma(one) > 0
    many = learn_in_batches(ProbabilityTree(naive_bayes=True, grace_period=20, refit_every=60), data, [1, 13, 250, 7])
    assert one.to_bytes() == many.to_bytes()


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=6))
def test_any_batch_boundaries_with_the_factor(sizes: list[int]) -> None:
    data = linear_stream(1200, seed=5)
    one = ProbabilityTree(naive_bayes=True, refit_every=100)
    for x, y in data:
        one.learn_one(x, y)
    many = learn_in_batches(ProbabilityTree(naive_bayes=True, refit_every=100), data, sizes)
    assert one.to_bytes() == many.to_bytes()


def test_round_trip_predicts_and_learns_identically() -> None:
    data = stream(1500, seed=6)
    model = ProbabilityTree(naive_bayes=True, grace_period=20, refit_every=60)
    for x, y in data[:1000]:
        model.learn_one(x, y)
    again = ProbabilityTree.from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
    for x, y in data[1000:]:
        assert again.predict_proba_one(x) == model.predict_proba_one(x)
        model.learn_one(x, y)
        again.learn_one(x, y)
    assert again.to_bytes() == model.to_bytes()


def test_batch_prediction_matches_one_at_a_time_and_explain_reconstructs_it() -> None:
    model = ProbabilityTree(naive_bayes=True, grace_period=20, refit_every=60)
    for x, y in stream(1500, seed=7):
        model.learn_one(x, y)
    assert gamma(model) > 0
    xs = [x for x, _ in stream(100, seed=8)] + [{}, {"a": None, "colour": "purple"}, {"b": "oops"}]
    table = model.predict_proba_many(pd.DataFrame(xs))
    np.testing.assert_allclose(model.predict_proba(xs), table.to_numpy(), rtol=1e-9)
    for i, x in enumerate(xs):
        one = model.predict_proba_one(x)
        # batch HGS sums ancestors by preorder cumulative sums: ~1e-13 absolute differences
        assert list(one.values()) == pytest.approx(table.iloc[i].tolist(), rel=1e-6, abs=1e-12)
        explained = model.explain_one(x)
        factor = explained["naive_bayes"]
        untempered = explained["linear"]["pooled"]  # the linear component's pool (on by default)
        z = {c: math.log(untempered[c]) + factor["gamma"] * factor["loglik"][c] for c in model.classes_}
        top = max(z.values())
        total = sum(math.exp(v - top) for v in z.values())
        assert {c: math.exp(v - top) / total for c, v in z.items()} == pytest.approx(one, rel=1e-9)
    assert model.summary()["naive_bayes"]["n_scored"] == 1500 // 8


def test_naive_bayes_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="naive_bayes") as info:
        ProbabilityTree(naive_bayes="yes")
    assert info.value.param == "naive_bayes"


def test_values_far_outside_the_training_range_give_positive_probabilities() -> None:
    # a value far from the class means gave probabilities of exactly 0 (exp underflowed) and
    # from |x| ~ 1e155 NaN for every class (the squares overflowed: -inf - -inf), in
    # predict_proba_one, predict_proba and the prequential predictions of learn_many alike
    rng = random.Random(0)
    model = ProbabilityTree(naive_bayes=True)
    for _ in range(1500):
        a = rng.uniform(-3, 3)
        model.learn_one({"a": a, "b": rng.gauss(0, 1)}, int(a > 0))
    assert model.summary()["naive_bayes"]["gamma"] > 0
    rows = [{"a": v, "b": 0.0} for v in (3.0, 1e3, 1e100, 1e155, 1e308, -1e308)]
    batch = model.predict_proba(rows)
    for row, expected in zip(rows, batch):
        proba = np.array(list(model.predict_proba_one(row).values()))
        assert proba.tolist() == expected.tolist()
        assert (proba > 0.99e-15).all() and math.isclose(proba.sum(), 1.0)  # floored, renormalised
    scored = model.learn_many(rows, [1] * len(rows), return_proba=True)
    assert np.isfinite(scored).all() and (scored > 0).all()
    assert np.isfinite(model.predict_proba([{"a": 1.0, "b": 0.0}])).all()  # and it learns on
