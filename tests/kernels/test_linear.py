"""The linear component's kernels against their oracle,
:class:`tests.reference.linear.LinearComponent`, bit for bit (both are scalar ``math``
arithmetic in the same order), and what the pool's fit must do."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from streamtree.kernels.linear import (
    MIX_SETTLE,
    lr_learn,
    lr_proba,
    mix_fit,
    mix_pool,
    mix_score,
    refit_due,
    standardise,
    uncertainty,
)
from streamtree.state import LOG_MIN_PROBA, WINDOW
from tests.reference.linear import LinearComponent


class Arrays:
    """The component's arrays, with capacities larger than the logical sizes."""

    def __init__(self, n_numeric: int, n_classes: int) -> None:
        self.w = np.zeros((n_classes + 2, n_numeric + 3))
        self.bias = np.zeros((n_classes + 2, 2))
        self.scale = np.zeros((n_numeric + 3, 4))
        self.mix_a = np.full((WINDOW, n_classes + 2), LOG_MIN_PROBA)
        self.mix_b = np.full((WINDOW, n_classes + 2), LOG_MIN_PROBA)
        self.mix_y = np.zeros(WINDOW, dtype=np.int64)
        self.mix_u = np.zeros(WINDOW)
        self.n_scored = 0
        self.a, self.b, self.c = 1.0, 0.0, 0.0


#: Finite values whose differences and squares overflow: the scales must leave them out.
HUGE = (1e308, -1e308, 1.7e308, -3e200, 1e160)


def _stream(n: int, n_numeric: int, n_classes: int, seed: int, huge: bool = False) -> list[tuple[list[float], int]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = [rng.gauss(3.0 * f, 1.0 + f) for f in range(n_numeric)]
        y = min(n_classes - 1, max(0, int(x[0] - x[1] / 3.0 + 1.5 + rng.gauss(0.0, 0.5))))
        if rng.random() < 0.05:
            x[rng.randrange(n_numeric)] = math.nan
        if huge and (i < 20 or rng.random() < 0.02):
            x[rng.randrange(n_numeric)] = rng.choice(HUGE)
        out.append((x, y))
    return out


@pytest.mark.parametrize(
    ("n_numeric", "n_classes", "huge"), [(3, 3, False), (24, 10, False), (3, 3, True)]
)  # 24 x 10: the vectorised loops
def test_the_kernels_follow_the_reference_bit_for_bit(n_numeric: int, n_classes: int, huge: bool) -> None:
    arrays, oracle = Arrays(n_numeric, n_classes), LinearComponent(n_numeric, n_classes)
    rng = random.Random(5)
    z, p_lr, p_tree = np.empty(n_numeric), np.empty(n_classes), np.empty(n_classes)
    acc = np.full(2 * n_numeric + 1, np.nan)  # lr_learn's scratch: its former contents must not matter
    for x, y in _stream(2500, n_numeric, n_classes, seed=1, huge=huge):
        row = np.array(x)
        tree = [rng.random() + 0.01 for _ in range(n_classes)]
        p_tree[:] = np.array(tree) / sum(tree)
        # predict before learning: the regression, then the pool with the current weights
        standardise(arrays.scale, row, n_numeric, z)
        assert z.tolist() == oracle.standardise(x)
        lr_proba(arrays.w, arrays.bias, z, n_numeric, n_classes, p_lr)
        assert p_lr.tolist() == oracle.proba(x)
        pooled = np.empty(n_classes)
        weight = arrays.b + arrays.c * uncertainty(p_tree, n_classes) if arrays.c else arrays.b  # as proba_at
        mix_pool(p_tree, p_lr, arrays.a, weight, n_classes, pooled)
        assert pooled.tolist() == oracle.pool(p_tree.tolist(), p_lr.tolist())
        # score, refit on schedule, learn
        mix_score(arrays.mix_a, arrays.mix_b, arrays.mix_y, arrays.mix_u, arrays.n_scored, p_tree, p_lr, n_classes, y)
        arrays.n_scored += 1
        if refit_due(arrays.n_scored):
            arrays.a, arrays.b, arrays.c = mix_fit(
                arrays.mix_a,
                arrays.mix_b,
                arrays.mix_y,
                arrays.mix_u,
                arrays.n_scored,
                n_classes,
                arrays.a,
                arrays.b,
                arrays.c,
            )
        oracle.score(p_tree.tolist(), p_lr.tolist(), y)
        assert (arrays.a, arrays.b, arrays.c) == (oracle.a, oracle.b, oracle.c)
        lr_learn(arrays.w, arrays.bias, arrays.scale, z, row, n_numeric, n_classes, y, p_lr, acc)
        oracle.learn(x, y)
    assert arrays.w[:n_classes, :n_numeric].tolist() == oracle.w
    assert arrays.scale[:n_numeric, 3].tolist() == oracle.g
    assert arrays.bias[:n_classes, 0].tolist() == oracle.bias
    assert arrays.scale[:n_numeric, :3].tolist() == oracle.scale
    assert np.isfinite(arrays.scale[:n_numeric]).all() and np.isfinite(arrays.w).all()
    # the window wrapped (2,500 examples in 1,000 rows) and the fit moved off the tree alone
    assert arrays.n_scored > WINDOW and arrays.b > 0.0
    # nothing past the logical sizes was written
    assert not arrays.w[n_classes:].any() and not arrays.w[:, n_numeric:].any()
    assert (arrays.mix_a[:, n_classes:] == LOG_MIN_PROBA).all()


def test_standardise_leaves_missing_and_constant_columns_at_zero_and_clips() -> None:
    scale = np.array([[10.0, 2.0, 9.0, 0.0], [10.0, 1.0, 0.0, 0.0], [1.0, 5.0, 0.0, 0.0]])  # sd 1; constant; seen once
    z = np.empty(3)
    standardise(scale, np.array([100.0, 7.0, 3.0]), 3, z)
    assert z.tolist() == [5.0, 0.0, 0.0]
    standardise(scale, np.array([math.nan, 7.0, 3.0]), 3, z)
    assert z[0] == 0.0
    standardise(scale, np.array([1.0, 7.0, 3.0]), 3, z)
    assert z[0] == -1.0


def _window(n: int, informative: bool, seed: int, tree: str = "uniform") -> Arrays:
    """A window where the regression is right 90% of the time with confidence 0.9
    (``informative``), or says the same confident things at random; the tree says nothing
    (``"uniform"``), or is sure and right on half the rows and says nothing on the others
    (``"half"``: the regression matters only where the tree is unsure)."""
    rng = random.Random(seed)
    arrays = Arrays(1, 2)
    for i in range(n):
        y = rng.randrange(2)
        guess = y if (rng.random() < 0.9 if informative else rng.random() < 0.5) else 1 - y
        p_lr = np.array([0.9, 0.1]) if guess == 0 else np.array([0.1, 0.9])
        p_tree = np.array([0.5, 0.5])
        if tree == "half" and i % 2:
            p_tree = np.array([0.99, 0.01]) if y == 0 else np.array([0.01, 0.99])
        mix_score(arrays.mix_a, arrays.mix_b, arrays.mix_y, arrays.mix_u, arrays.n_scored, p_tree, p_lr, 2, y)
        arrays.n_scored += 1
    return arrays


def _refits(arrays: Arrays, times: int) -> tuple[float, float, float]:
    """``times`` warm-started refits on the same window (the model refits every 100 examples)."""
    a, b, c = 1.0, 0.0, 0.0
    for _ in range(times):
        a, b, c = mix_fit(arrays.mix_a, arrays.mix_b, arrays.mix_y, arrays.mix_u, arrays.n_scored, 2, a, b, c)
    return a, b, c


def test_the_pool_trusts_a_regression_that_predicts_and_ignores_one_that_does_not() -> None:
    good = _window(WINDOW, informative=True, seed=0)
    first = _refits(good, 1)
    a, b, c = _refits(good, 20)
    weight = b + 0.5 * c  # the tree is uniform: u = 1/2 on every row
    assert 0.0 < first[1] + 0.5 * first[2] < weight and 0.8 < weight < 1.2  # calibrated: weight ~1
    noise = _window(WINDOW, informative=False, seed=0)
    a, b, c = _refits(noise, 20)
    assert b < 0.05 and c < 0.05 and a == pytest.approx(1.0)


def test_the_regression_weighs_more_where_the_tree_is_unsure() -> None:
    arrays = _window(WINDOW, informative=True, seed=1, tree="half")
    a, b, c = _refits(arrays, 30)
    # the weight b + c u is larger on the unsure rows (u = 1/2) than on the sure ones (u = 0.01)
    assert c > 0.2 and 0.8 < b + c / 2 < 1.2


def test_the_pool_is_refitted_every_100_examples_while_it_settles_then_every_500() -> None:
    due = [n for n in range(1, 4001) if refit_due(n)]
    assert MIX_SETTLE == 2000
    assert due == [*range(100, 2001, 100), 2500, 3000, 3500, 4000]


def test_uncertainty_is_one_minus_the_top_probability() -> None:
    assert uncertainty(np.array([0.2, 0.7, 0.1, 9.0]), 3) == pytest.approx(0.3)


def test_the_pool_with_the_tree_alone_is_the_tree() -> None:
    p_tree, p_lr, out = np.array([0.2, 0.7, 0.1]), np.array([0.6, 0.2, 0.2]), np.empty(3)
    mix_pool(p_tree, p_lr, 1.0, 0.0, 3, out)
    np.testing.assert_allclose(out, p_tree, rtol=1e-15)
    mix_pool(p_tree, p_lr, 0.0, 1.0, 3, out)
    np.testing.assert_allclose(out, p_lr, rtol=1e-15)


def test_a_raw_row_is_predicted_as_its_standardised_values_are() -> None:
    """The prediction path standardises as it goes: the same bits as standardise + lr_proba."""
    from streamtree.kernels.linear import lr_proba_row

    n_numeric, n_classes = 4, 3
    arrays = Arrays(n_numeric, n_classes)
    z, q = np.empty(n_numeric), np.empty(n_classes)
    for x, y in _stream(300, n_numeric, n_classes, seed=3):
        row = np.array(x)
        standardise(arrays.scale, row, n_numeric, z)
        lr_proba(arrays.w, arrays.bias, z, n_numeric, n_classes, q)
        direct = np.empty(n_classes)
        lr_proba_row(arrays.w, arrays.bias, arrays.scale, row, n_numeric, n_classes, direct)
        assert direct.tolist() == q.tolist()
        lr_learn(arrays.w, arrays.bias, arrays.scale, z, row, n_numeric, n_classes, y, q, np.empty(2 * n_numeric))
