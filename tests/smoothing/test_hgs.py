"""HGS: the LOOCV objective against a slow obvious implementation and finite differences,
its edge cases, and the online and paper fitting modes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamtree.exceptions import ConfigError
from streamtree.smoothing.hgs import HGS, loocv
from streamtree.topology import Topology


def random_tree(rng: np.random.Generator, n_nodes: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """A random tree whose internal counts are the sums of their children's plus some
    examples that stopped there (a missing feature), as the online tree keeps them."""
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n_nodes)])
    counts = np.zeros((n_nodes, n_classes))
    for i in range(n_nodes - 1, -1, -1):
        counts[i] += rng.integers(0, 6, n_classes) * (rng.random() < 0.9)
        if parent[i] >= 0:
            counts[parent[i]] += counts[i]
    return parent, counts


def slow_loocv(parent: np.ndarray, counts: np.ndarray, alpha: np.ndarray, prior: float) -> float:
    """Eq. 6 written out leaf by leaf, ancestor by ancestor."""
    s, k = counts.shape
    children = {i for i in parent if i >= 0}
    total_cost, n = 0.0, 0.0
    for leaf in range(s):
        if leaf in children:
            continue
        ancestors = []
        p = parent[leaf]
        while p >= 0:
            ancestors.append(p)
            p = parent[p]
        n += counts[leaf].sum()
        for c in range(k):
            if counts[leaf, c] <= 0:
                continue
            num = counts[leaf, c] - 1 + prior / k
            den = counts[leaf].sum() - 1 + prior
            for p in ancestors:
                tot = counts[p].sum()
                th = (counts[p, c] - 1) / (tot - 1) if tot > 1 else 0.0
                num += alpha[p] * th
                den += alpha[p]
            total_cost += counts[leaf, c] * -math.log2(num / den) if num > 0 else math.inf
    return total_cost / n if n else 0.0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("prior", [0.0, 0.7])
def test_loocv_matches_slow_implementation(seed: int, prior: float) -> None:
    rng = np.random.default_rng(seed)
    parent, counts = random_tree(rng, int(rng.integers(1, 40)), int(rng.integers(2, 5)))
    alpha = rng.uniform(0.1, 3.0, len(parent))
    cost, _, _ = loocv(parent, counts, alpha, prior)
    expected = slow_loocv(parent, counts, alpha, prior)
    assert cost == pytest.approx(expected, rel=1e-12) or (math.isinf(cost) and math.isinf(expected))


@pytest.mark.parametrize("seed", range(6))
def test_gradient_matches_finite_differences(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    parent, counts = random_tree(rng, 30, 3)
    alpha = rng.uniform(0.2, 2.0, len(parent))
    prior = 0.5
    _, grad, grad0 = loocv(parent, counts, alpha, prior)
    is_leaf = Topology.from_parent(parent).is_leaf
    h = 1e-6
    for i in range(len(parent)):
        up, down = alpha.copy(), alpha.copy()
        up[i] += h
        down[i] -= h
        numeric = (loocv(parent, counts, up, prior)[0] - loocv(parent, counts, down, prior)[0]) / (2 * h)
        assert grad[i] == pytest.approx(numeric, abs=1e-7)
        if is_leaf[i]:
            assert grad[i] == 0.0
    numeric0 = (loocv(parent, counts, alpha, prior + h)[0] - loocv(parent, counts, alpha, prior - h)[0]) / (2 * h)
    assert grad0 == pytest.approx(numeric0, abs=1e-7)


def test_class_seen_once_without_prior_gives_infinite_cost_and_finite_gradient() -> None:
    parent = np.array([-1, 0, 0])
    counts = np.array([[4.0, 1.0], [3.0, 1.0], [1.0, 0.0]])  # class 1 seen once in the tree
    cost, grad, _ = loocv(parent, counts, np.ones(3), 0.0)
    assert math.isinf(cost)
    assert np.all(np.isfinite(grad))
    cost_with_prior, _, _ = loocv(parent, counts, np.ones(3), 0.5)
    assert math.isfinite(cost_with_prior)


def test_ancestor_with_a_single_example_only_adds_to_the_denominator() -> None:
    parent = np.array([-1, 0])
    counts = np.array([[1.0, 0.0], [1.0, 0.0]])
    # q = (1 - 1 + 0.5 / 2 + alpha * 0) / (1 - 1 + 0.5 + alpha): the root contributes th = 0
    cost, _, _ = loocv(parent, counts, np.array([2.0, 0.0]), 0.5)
    assert cost == pytest.approx(-math.log2(0.25 / 2.5))


def test_no_examples_at_leaves_costs_nothing() -> None:
    cost, grad, grad0 = loocv(np.array([-1, 0, 0]), np.zeros((3, 2)), np.ones(3), 1.0)
    assert (cost, grad0) == (0.0, 0.0) and not grad.any()


def test_online_refits_lower_the_cost_and_keep_weights_positive() -> None:
    rng = np.random.default_rng(7)
    parent, counts = random_tree(rng, 60, 3)
    topology = Topology.from_parent(parent)
    hgs = HGS(steps=1)
    costs = []
    for _ in range(30):
        hgs.refit(topology, counts)
        costs.append(loocv(parent, counts, hgs.alpha, hgs.alpha0)[0])
    assert costs[-1] < costs[0]
    assert np.all(hgs.alpha > 0) and hgs.alpha0 > 0


def test_paper_mode_is_algorithm_1() -> None:
    rng = np.random.default_rng(3)
    parent, counts = random_tree(rng, 25, 2)
    topology = Topology.from_parent(parent)
    hgs = HGS(mode="paper")
    start = loocv(parent, counts, np.where(topology.is_leaf, 0.0, 1.0), 0.0)[0]
    hgs.refit(topology, counts)
    assert hgs.alpha0 == 0.0
    assert np.all(hgs.alpha >= 0)
    assert loocv(parent, counts, hgs.alpha, 0.0)[0] <= start


def test_new_internal_node_starts_from_its_parents_weight() -> None:
    hgs = HGS()
    counts = np.array([[10.0, 10.0], [9.0, 1.0], [1.0, 9.0]])
    t = Topology.from_parent(np.array([-1, 0, 0]))
    hgs.refit(t, counts)
    grown = Topology.from_parent(np.array([-1, 0, 0, 1, 1]))
    hgs.node_proba(grown, np.vstack([counts, [[5.0, 0.0], [4.0, 1.0]]]))
    assert hgs.alpha[3] == hgs.alpha[1] and hgs.alpha[4] == hgs.alpha[1]


def test_path_proba_equals_node_proba() -> None:
    rng = np.random.default_rng(11)
    parent, counts = random_tree(rng, 40, 4)
    topology = Topology.from_parent(parent)
    hgs = HGS(steps=10)
    hgs.refit(topology, counts)
    table = hgs.node_proba(topology, counts)
    for node in range(len(parent)):
        path = [node]
        while parent[path[0]] >= 0:
            path.insert(0, parent[path[0]])
        np.testing.assert_allclose(hgs.path_proba(parent, counts, np.array(path)), table[node], rtol=1e-12)
    assert np.all(table > 0)
    np.testing.assert_allclose(table.sum(axis=1), 1.0)


def test_state_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(5)
    parent, counts = random_tree(rng, 30, 3)
    topology = Topology.from_parent(parent)
    a, b = HGS(steps=3), HGS(steps=3)
    a.refit(topology, counts)
    b.set_state(a.get_state())
    a.refit(topology, counts)
    b.refit(topology, counts)
    assert np.array_equal(a.alpha, b.alpha) and a.alpha0 == b.alpha0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"mode": "fast"}, "mode"), ({"steps": 0}, "steps"), ({"prior_weight": -1.0}, "prior_weight")],
)
def test_invalid_parameters_name_themselves(kwargs: dict, name: str) -> None:
    with pytest.raises(ConfigError, match=f"'{name}'"):
        HGS(**kwargs)
