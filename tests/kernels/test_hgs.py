"""The HGS kernels against the numpy oracle (``tests/reference/hgs.py``), finite differences
and the objective's edge cases, on random binary trees with padded arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamtree.kernels import hgs as kh
from streamtree.smoothing import HGS
from streamtree.state import ALPHA, GRAD, HGS_COLUMNS, STEP, THETA
from streamtree.topology import Topology
from tests.kernels.trees import RandomTree, random_tree
from tests.reference import hgs as ref

RTOL = 1e-9


def close(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal up to RTOL, with an absolute slack at rounding level: the oracle's preorder
    cumulative sums subtract large partial sums, and a gradient that is 0 in exact arithmetic
    (one class) comes out as a difference of terms of order 1, so a tiny entry carries their
    error."""
    scale = float(np.max(np.abs(expected), initial=0.0))
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-12 * scale + 1e-14)


def kernel_loocv(tree: RandomTree, alpha: np.ndarray, alpha0: float) -> tuple[float, np.ndarray, float]:
    """The kernel on the padded arrays (alpha and grad padded with NaN too)."""
    cap = tree.parent_cap.shape[0]
    alpha_cap = np.full(cap, np.nan)
    alpha_cap[: tree.n] = alpha
    grad = np.full(cap, np.nan)
    cost, grad0 = kh.loocv(tree.parent_cap, tree.internal_cap, tree.counts_cap, tree.n, tree.k, alpha_cap, alpha0, grad)
    assert np.isnan(grad[tree.n :]).all()  # nothing written past n
    return cost, grad[: tree.n], grad0


def random_case(seed: int, max_splits: int = 30) -> tuple[np.random.Generator, RandomTree]:
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, int(rng.integers(0, max_splits)), int(rng.integers(1, 7)), fractional=seed % 4 == 3)
    return rng, tree


# -- loocv -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("alpha0", [0.0, 0.7])
def test_loocv_matches_the_oracle(seed: int, alpha0: float) -> None:
    rng, tree = random_case(seed)
    alpha = rng.uniform(0.05, 3.0, tree.n)
    cost, grad, grad0 = kernel_loocv(tree, alpha, alpha0)
    expected_cost, expected_grad, expected_grad0 = ref.loocv(tree.parent, tree.counts, alpha, alpha0)
    if math.isinf(expected_cost):
        assert math.isinf(cost)
    else:
        assert cost == pytest.approx(expected_cost, rel=RTOL)
    close(grad, expected_grad)
    assert grad0 == pytest.approx(
        expected_grad0, rel=RTOL, abs=1e-12 * max(1.0, float(np.abs(expected_grad).max(initial=0)))
    )
    assert np.all(grad[~tree.internal] == 0.0)


@pytest.mark.parametrize("seed", range(8))
def test_loocv_gradient_matches_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(500 + seed)
    tree = random_tree(rng, 15, int(rng.integers(2, 6)), empty_leaves=0.0, fractional=seed % 2 == 1)
    alpha = rng.uniform(0.2, 2.0, tree.n)
    alpha0 = 0.5
    _, grad, grad0 = kernel_loocv(tree, alpha, alpha0)
    h = 1e-6
    for i in range(tree.n):
        up, down = alpha.copy(), alpha.copy()
        up[i] += h
        down[i] -= h
        numeric = (kernel_loocv(tree, up, alpha0)[0] - kernel_loocv(tree, down, alpha0)[0]) / (2 * h)
        assert grad[i] == pytest.approx(numeric, abs=1e-7)
    numeric0 = (kernel_loocv(tree, alpha, alpha0 + h)[0] - kernel_loocv(tree, alpha, alpha0 - h)[0]) / (2 * h)
    assert grad0 == pytest.approx(numeric0, abs=1e-7)


def test_loocv_single_node() -> None:
    parent, internal = np.array([-1], dtype=np.int64), np.array([False])
    counts = np.array([[3.0, 1.0]])
    grad = np.empty(1)
    cost, grad0 = kh.loocv(parent, internal, counts, 1, 2, np.ones(1), 0.5, grad)
    # q = (n_k - 1 + 0.25) / (4 - 1 + 0.5)
    expected = -(3 * math.log2(2.25 / 3.5) + 1 * math.log2(0.25 / 3.5)) / 4
    assert cost == pytest.approx(expected, rel=1e-12)
    assert grad[0] == 0.0
    ref_cost, _, ref_grad0 = ref.loocv(parent, counts, np.ones(1), 0.5)
    assert cost == pytest.approx(ref_cost, rel=1e-12) and grad0 == pytest.approx(ref_grad0, rel=1e-12)


def test_loocv_no_nodes_and_no_classes_cost_nothing() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert kh.loocv(empty, np.zeros(0, bool), np.zeros((0, 2)), 0, 2, np.zeros(0), 1.0, np.zeros(0)) == (0.0, 0.0)
    grad = np.full(3, np.nan)
    parent, internal = np.array([-1, 0, 0]), np.array([True, False, False])
    assert kh.loocv(parent, internal, np.zeros((3, 0)), 3, 0, np.ones(3), 1.0, grad) == (0.0, 0.0)
    assert not grad.any()


def test_loocv_zero_counts_cost_nothing() -> None:
    parent, internal = np.array([-1, 0, 0]), np.array([True, False, False])
    grad = np.full(3, np.nan)
    assert kh.loocv(parent, internal, np.zeros((3, 2)), 3, 2, np.ones(3), 1.0, grad) == (0.0, 0.0)
    assert not grad.any()


def test_class_seen_once_without_pseudo_node_is_infinite_with_the_oracles_gradient() -> None:
    parent, internal = np.array([-1, 0, 0]), np.array([True, False, False])
    counts = np.array([[4.0, 1.0], [3.0, 1.0], [1.0, 0.0]])  # class 1 seen once in the tree
    grad = np.empty(3)
    cost, grad0 = kh.loocv(parent, internal, counts, 3, 2, np.ones(3), 0.0, grad)
    assert math.isinf(cost) and np.all(np.isfinite(grad)) and math.isfinite(grad0)
    _, expected_grad, expected_grad0 = ref.loocv(parent, counts, np.ones(3), 0.0)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    assert grad0 == pytest.approx(expected_grad0, rel=1e-12)
    cost_with_prior, _ = kh.loocv(parent, internal, counts, 3, 2, np.ones(3), 0.5, grad)
    assert math.isfinite(cost_with_prior)


def test_zero_weights_and_no_pseudo_node_leave_a_single_example_leaf_out() -> None:
    # leaf 2 holds one example and every weight is 0: q = 0 / 0, a constant (infinite) term.
    # The numpy oracle's gradient is NaN here (its w q is 0 * NaN); the documented behaviour
    # is the gradient of the finite terms: leaf 1 alone, D = 6, q = (3/6, 2/6), w = c / (D q)
    parent, internal = np.array([-1, 0, 0]), np.array([True, False, False])
    counts = np.array([[5.0, 3.0], [4.0, 3.0], [1.0, 0.0]])
    grad = np.empty(3)
    cost, grad0 = kh.loocv(parent, internal, counts, 3, 2, np.zeros(3), 0.0, grad)
    assert math.isinf(cost) and math.isinf(ref.loocv(parent, counts, np.zeros(3), 0.0)[0])
    w, q, th = np.array([4 / 3, 3 / 2]), np.array([3 / 6, 2 / 6]), np.array([4 / 7, 2 / 7])
    scale = 1.0 / (8 * math.log(2.0))
    np.testing.assert_allclose(grad, [(w @ q - th @ w) * scale, 0.0, 0.0], rtol=1e-12)
    assert grad0 == pytest.approx((w @ q - w.sum() / 2) * scale, rel=1e-12)


def test_ancestor_with_a_single_example_only_adds_to_the_denominator() -> None:
    parent, internal = np.array([-1, 0]), np.array([True, False])
    counts = np.array([[1.0, 0.0], [1.0, 0.0]])
    cost, _ = kh.loocv(parent, internal, counts, 2, 2, np.array([2.0, 0.0]), 0.5, np.empty(2))
    assert cost == pytest.approx(-math.log2(0.25 / 2.5), rel=1e-12)


# -- refit_online --------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("steps", [1, 3, 7])
def test_refit_online_matches_the_oracle(seed: int, steps: int) -> None:
    rng, tree = random_case(2000 + seed)
    theta = rng.uniform(-2.0, 2.0, tree.n)
    step = rng.uniform(1e-3, 0.5, tree.n)
    previous = rng.normal(0.0, 1e-2, tree.n) * tree.internal
    theta0, step0, grad0 = float(rng.uniform(-2, 2)), 0.1, float(rng.normal(0, 1e-2))
    cap = tree.parent_cap.shape[0]
    hgs = np.full((cap, HGS_COLUMNS), np.nan)
    hgs[: tree.n, THETA], hgs[: tree.n, STEP], hgs[: tree.n, GRAD] = theta, step, previous
    scal = np.array([theta0, step0, grad0])
    cost = kh.refit_online(tree.parent_cap, tree.internal_cap, tree.counts_cap, tree.n, tree.k, hgs, scal, steps)
    e_theta, e_step, e_grad, e_theta0, e_step0, e_grad0, e_cost = ref.refit_online(
        tree.parent, tree.counts, theta, step, previous, theta0, step0, grad0, steps
    )
    assert np.isnan(hgs[tree.n :]).all()
    np.testing.assert_allclose(hgs[: tree.n, THETA], e_theta, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(hgs[: tree.n, STEP], e_step, rtol=RTOL)
    close(hgs[: tree.n, GRAD], e_grad)
    # the weights the prediction kernels read: exp of the new log-weights, bit for bit
    assert hgs[: tree.n, ALPHA].tolist() == [math.exp(v) for v in hgs[: tree.n, THETA]]
    np.testing.assert_allclose(scal[:2], [e_theta0, e_step0], rtol=RTOL)
    assert scal[2] == pytest.approx(e_grad0, rel=RTOL, abs=1e-12)
    assert cost == pytest.approx(e_cost, rel=RTOL) or (math.isinf(cost) and math.isinf(e_cost))


def test_refit_online_keeps_weights_in_range_and_lowers_the_cost() -> None:
    rng = np.random.default_rng(7)
    tree = random_tree(rng, 40, 3)
    hgs = np.zeros((tree.n, HGS_COLUMNS))
    hgs[:, STEP] = 0.1
    scal = np.array([0.0, 0.1, 0.0])
    first = kh.refit_online(tree.parent, tree.internal, tree.counts, tree.n, tree.k, hgs, scal, 1)
    last = kh.refit_online(tree.parent, tree.internal, tree.counts, tree.n, tree.k, hgs, scal, 40)
    assert last < first
    assert np.all((hgs[:, THETA] >= kh.LOG_ALPHA_MIN) & (hgs[:, THETA] <= kh.LOG_ALPHA_MAX))
    assert np.all((hgs[:, STEP] >= 1e-6) & (hgs[:, STEP] <= 1.0))
    assert np.all(hgs[~tree.internal, GRAD] == 0.0)


def test_hgs_smoother_refit_is_the_oracles_refit() -> None:
    rng = np.random.default_rng(17)
    tree = random_tree(rng, 30, 4)
    topology = Topology.from_parent(tree.parent)
    smoother = HGS(steps=4, prior_weight=0.5)
    smoother.refit(topology, tree.counts)
    e_theta, _, _, e_theta0, _, _, e_cost = ref.refit_online(
        tree.parent, tree.counts, np.zeros(tree.n), np.full(tree.n, 0.1), np.zeros(tree.n), math.log(0.5), 0.1, 0.0, 4
    )
    np.testing.assert_allclose(np.log(smoother.alpha), e_theta, rtol=RTOL, atol=1e-12)
    assert math.log(smoother.alpha0) == pytest.approx(e_theta0, rel=RTOL)
    assert smoother.last_cost == pytest.approx(e_cost, rel=RTOL)


# -- refit_paper ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_refit_paper_matches_the_oracle(seed: int) -> None:
    _, tree = random_case(3000 + seed, max_splits=15)
    alpha = np.full(tree.parent_cap.shape[0], np.nan)
    cost = kh.refit_paper(tree.parent_cap, tree.internal_cap, tree.counts_cap, tree.n, tree.k, 0.05, 1e-5, 300, alpha)
    e_alpha, e_cost = ref.refit_paper(tree.parent, tree.counts, 0.05, 1e-5, 300)
    assert np.isnan(alpha[tree.n :]).all()
    np.testing.assert_allclose(alpha[: tree.n], e_alpha, rtol=RTOL, atol=1e-12)
    assert cost == pytest.approx(e_cost, rel=RTOL) or (math.isinf(cost) and math.isinf(e_cost))
    assert np.all(alpha[: tree.n] >= 0)


# -- node_proba ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("alpha0", [0.0, 0.4])
def test_node_proba_matches_the_oracle_and_the_path_kernel(seed: int, alpha0: float) -> None:
    rng, tree = random_case(4000 + seed)
    alpha = rng.uniform(0.0, 3.0, tree.n) * (rng.random(tree.n) < 0.8)  # some weights exactly 0
    cap = tree.parent_cap.shape[0]
    out = np.full((cap, tree.k + 2), np.nan)
    alpha_cap = np.full(cap, np.nan)
    alpha_cap[: tree.n] = alpha
    kh.node_proba(tree.parent_cap, tree.internal_cap, tree.counts_cap, tree.n, tree.k, alpha_cap, alpha0, out)
    assert np.isnan(out[tree.n :]).all() and np.isnan(out[:, tree.k :]).all()
    expected = ref.node_proba(tree.parent, tree.counts, alpha, alpha0)
    np.testing.assert_allclose(out[: tree.n, : tree.k], expected, rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(out[: tree.n, : tree.k].sum(axis=1), 1.0, rtol=1e-12)


def test_node_proba_without_counts_or_weights_is_uniform() -> None:
    parent, internal = np.array([-1, 0, 0]), np.array([True, False, False])
    out = np.empty((3, 4))
    kh.node_proba(parent, internal, np.zeros((3, 4)), 3, 4, np.ones(3), 0.0, out)
    assert np.all(out == 0.25)


def test_hgs_reads_the_online_trees_weights() -> None:
    from streamtree.state import F_THETA0, M_NODES, M_REFITS, new_arrays

    tree = new_arrays(nodes=8, prior_weight=0.5)
    tree.meta[M_NODES] = 3
    tree.meta[M_REFITS] = 4
    tree.hgs[:3, THETA] = [0.0, math.log(2.0), math.log(3.0)]
    kh.sync_alpha(tree.hgs, 3)
    alpha, alpha0 = HGS().weights(tree)
    assert alpha is not None and alpha0 is not None
    np.testing.assert_allclose(alpha, [1.0, 2.0, 3.0], rtol=1e-15)
    assert alpha0 == pytest.approx(0.5, rel=1e-15) and tree.meta_f[F_THETA0] == math.log(0.5)
    assert HGS().summary(tree) == {"prior_weight": pytest.approx(0.5, rel=1e-15), "n_refits": 4}
