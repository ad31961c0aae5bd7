"""HDP smoothing: the sampler against posteriors computed another way, and its contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from streamtree.exceptions import ConfigError, InputError
from streamtree.smoothing.hdp import HDP, crt
from streamtree.topology import Topology


def _log_polya(n: np.ndarray, a: np.ndarray) -> float:
    """Log-probability of one ordered sequence with class counts ``n`` under Dirichlet(``a``)."""
    return float(
        special.gammaln(a.sum())
        - special.gammaln(a.sum() + n.sum())
        + np.sum(special.gammaln(a + n) - special.gammaln(a))
    )


def _beta_pdf(x: float, a: float, b: float) -> float:
    return math.exp((a - 1) * math.log(x) + (b - 1) * math.log1p(-x) - special.betaln(a, b))


def _tree(parent: list[int]) -> Topology:
    return Topology.from_parent(np.array(parent))


# ------------------------------------------------------------------ exact posteriors


def test_one_level_posterior_mean_matches_quadrature() -> None:
    """Root with two leaves, fixed concentration: E[theta_leaf | data] by 1-D quadrature over
    the root's probability, with the leaves' distributions integrated out analytically."""
    c = 1.5
    leaves = [np.array([3.0, 0.0]), np.array([1.0, 2.0])]

    def weight(r: float) -> float:
        a = np.array([c * r, c * (1 - r)])
        return _beta_pdf(r, c / 2, c / 2) * math.exp(sum(_log_polya(n, a) for n in leaves))

    z = integrate.quad(weight, 0, 1, limit=200)[0]
    exact = [
        integrate.quad(lambda r, n=n: weight(r) * (n[0] + c * r) / (n.sum() + c), 0, 1, limit=200)[0] / z
        for n in leaves
    ]
    counts = np.array([leaves[0] + leaves[1], leaves[0], leaves[1]])
    hdp = HDP(iterations=20_000, burn_in=500, concentration=c, sample_concentration=False, seed=5)
    t = _tree([-1, 0, 0])
    hdp.refit(t, counts)
    p = hdp.node_proba(t, counts)
    assert p[1, 0] == pytest.approx(exact[0], abs=1.5e-3)
    assert p[2, 0] == pytest.approx(exact[1], abs=1.5e-3)
    # the root as a leaf: its own counts smoothed toward the uniform base
    assert p[0, 0] == pytest.approx((4 + c / 2) / (6 + c))


def test_two_level_posterior_mean_matches_double_quadrature() -> None:
    """root -> (inner -> leaves 3, 4), leaf 2: the inner node's estimate is itself smoothed,
    so this checks the recursion (tables passed up two levels, theta sampled down two)."""
    c = 2.0
    n2, n3, n4 = np.array([1.0, 3.0]), np.array([4.0, 0.0]), np.array([2.0, 1.0])

    def weight(m: float, r: float) -> float:
        a_r = np.array([c * r, c * (1 - r)])
        a_m = np.array([c * m, c * (1 - m)])
        log_w = _log_polya(n2, a_r) + _log_polya(n3, a_m) + _log_polya(n4, a_m)
        return _beta_pdf(r, c / 2, c / 2) * _beta_pdf(m, c * r, c * (1 - r)) * math.exp(log_w)

    opts = {"limit": 200, "epsabs": 1e-11}

    def double(f):  # type: ignore[no-untyped-def]
        return integrate.nquad(f, [[0, 1], [0, 1]], opts=[opts, opts])[0]

    z = double(weight)
    exact3 = double(lambda m, r: weight(m, r) * (n3[0] + c * m) / (n3.sum() + c)) / z
    exact2 = double(lambda m, r: weight(m, r) * (n2[0] + c * r) / (n2.sum() + c)) / z
    t = _tree([-1, 0, 0, 1, 1])
    counts = np.array([n2 + n3 + n4, n3 + n4, n2, n3, n4])
    hdp = HDP(iterations=20_000, burn_in=500, concentration=c, sample_concentration=False, seed=2)
    hdp.refit(t, counts)
    p = hdp.node_proba(t, counts)
    assert p[3, 0] == pytest.approx(exact3, abs=2e-3)
    assert p[2, 0] == pytest.approx(exact2, abs=2e-3)


def test_sampled_concentration_matches_quadrature_over_concentration() -> None:
    """Single tying with a Gamma(2, 1) prior: the posterior means of the leaf probability and of
    the concentration, integrating over both the concentration and the root's probability."""
    shape, rate = 2.0, 1.0
    leaves = [np.array([5.0, 0.0]), np.array([0.0, 4.0]), np.array([2.0, 2.0])]

    def weight(r: float, c: float) -> float:
        a = np.array([c * r, c * (1 - r)])
        prior = math.exp(shape * math.log(rate) + (shape - 1) * math.log(c) - rate * c - special.gammaln(shape))
        return prior * _beta_pdf(r, c / 2, c / 2) * math.exp(sum(_log_polya(n, a) for n in leaves))

    opts = {"limit": 200, "epsabs": 1e-12}

    def double(f):  # type: ignore[no-untyped-def]
        return integrate.nquad(f, [[0, 1], [0, 40]], opts=[opts, opts])[0]

    z = double(weight)
    leaf0 = double(lambda r, c: weight(r, c) * (5 + c * r) / (5 + c)) / z
    mean_c = double(lambda r, c: weight(r, c) * c) / z
    t = _tree([-1, 0, 0, 0])
    counts = np.array([sum(leaves), *leaves])
    hdp = HDP(iterations=20_000, burn_in=1000, prior_shape=shape, prior_rate=rate, seed=11)
    hdp.refit(t, counts)
    assert hdp.node_proba(t, counts)[1, 0] == pytest.approx(leaf0, abs=3e-3)
    assert hdp.concentration_[0] == pytest.approx(mean_c, rel=0.05)


def test_crt_matches_the_antoniak_distribution() -> None:
    """P(t | m, a) = |s(m, t)| a^t Gamma(a) / Gamma(a + m) (unsigned Stirling numbers)."""
    m, a = 6, 1.7
    stirling = np.zeros((m + 1, m + 1))
    stirling[0, 0] = 1
    for n in range(1, m + 1):
        for k in range(1, n + 1):
            stirling[n, k] = stirling[n - 1, k - 1] + (n - 1) * stirling[n - 1, k]
    exact = np.array([stirling[m, t] * a**t for t in range(m + 1)]) * math.exp(
        special.gammaln(a) - special.gammaln(a + m)
    )
    draws = crt(np.full(200_000, m), np.full(200_000, a), np.random.default_rng(0))
    freq = np.bincount(draws, minlength=m + 1) / draws.size
    np.testing.assert_allclose(freq, exact, atol=4e-3)


# ------------------------------------------------------------------ contract


def _random_tree(rng: np.random.Generator, n_nodes: int, k: int) -> tuple[Topology, np.ndarray]:
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n_nodes)])
    t = Topology.from_parent(parent)
    leaf_counts = np.where(t.is_leaf[:, None], rng.integers(0, 6, size=(n_nodes, k)), 0).astype(float)
    counts = t.subtree_sum(leaf_counts)
    return t, counts


@pytest.mark.parametrize("tying", ["single", "level", "parent", "none"])
def test_probabilities_are_valid_distributions(tying: str) -> None:
    rng = np.random.default_rng(1)
    for k in (1, 2, 5):
        t, counts = _random_tree(rng, 40, k)
        hdp = HDP(iterations=60, tying=tying, seed=3)  # type: ignore[arg-type]
        hdp.refit(t, counts)
        p = hdp.node_proba(t, counts)
        assert p.shape == counts.shape
        assert np.all(p > 0) and np.allclose(p.sum(axis=1), 1.0)


def test_single_node_tree_and_empty_leaves() -> None:
    t = _tree([-1])
    hdp = HDP(iterations=50, seed=0)
    p = hdp.node_proba(t, np.array([[3.0, 1.0]]))
    assert np.allclose(p.sum(), 1.0) and p[0, 0] > p[0, 1]
    t = _tree([-1, 0, 0])
    counts = np.array([[3.0, 1.0], [3.0, 1.0], [0.0, 0.0]])
    hdp.refit(t, counts)
    p = hdp.node_proba(t, counts)
    assert np.allclose(p[2].sum(), 1.0) and p[2, 0] > 0.5  # an empty leaf follows its parent


@pytest.mark.parametrize(
    ("tying", "same"),
    [("single", [[0, 1, 2, 3, 4, 5, 6]]), ("level", [[1, 2], [3, 4, 5, 6]]), ("parent", [[1, 2], [3, 4], [5, 6]])],
)
def test_tying_shares_concentrations_within_groups(tying: str, same: list[list[int]]) -> None:
    t = _tree([-1, 0, 0, 1, 1, 2, 2])
    counts = t.subtree_sum(np.array([[0, 0], [0, 0], [0, 0], [5, 1], [0, 4], [3, 3], [1, 6]], dtype=float))
    hdp = HDP(iterations=200, tying=tying, seed=4)  # type: ignore[arg-type]
    hdp.refit(t, counts)
    c = hdp.concentration_
    for group in same:
        assert np.all(c[group] == c[group[0]])
    none = HDP(iterations=200, tying="none", seed=4)
    none.refit(t, counts)
    assert len(set(none.concentration_.tolist())) == 7


def test_same_seed_same_bits_other_seed_differs() -> None:
    rng = np.random.default_rng(7)
    t, counts = _random_tree(rng, 60, 3)
    runs = []
    for seed in (9, 9, 10):
        hdp = HDP(iterations=100, seed=seed)
        hdp.refit(t, counts)
        runs.append(hdp.node_proba(t, counts))
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_refit_does_not_touch_the_global_rng() -> None:
    t, counts = _random_tree(np.random.default_rng(0), 20, 2)
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    HDP(iterations=20).refit(t, counts)
    assert np.random.random() == before


def test_state_round_trip_and_counts_that_changed() -> None:
    t, counts = _random_tree(np.random.default_rng(3), 30, 2)
    hdp = HDP(iterations=80, seed=1)
    hdp.refit(t, counts)
    other = HDP(iterations=80, seed=1)
    other.set_state(hdp.get_state())
    assert np.array_equal(other.node_proba(t, counts), hdp.node_proba(t, counts))
    # counts grown since the refit: the plug-in posterior means, still valid distributions
    more = counts.copy()
    more[:, 0] += 1.0
    p = other.node_proba(t, more)
    assert np.all(p > 0) and np.allclose(p.sum(axis=1), 1.0)
    assert not np.array_equal(p, hdp.node_proba(t, counts))
    leaf = int(np.flatnonzero(t.is_leaf)[-1])
    path = [leaf]
    while t.parent[path[-1]] >= 0:
        path.append(int(t.parent[path[-1]]))
    full = np.array(path[::-1])
    np.testing.assert_allclose(other.path_proba(t.parent, counts, full), hdp.node_proba(t, counts)[leaf])


def test_honest_fit_counts_set_parameters_and_counts_predict() -> None:
    t = _tree([-1, 0, 0])
    counts = np.array([[10.0, 10.0], [9.0, 1.0], [1.0, 9.0]])
    fit = np.array([[6.0, 6.0], [3.0, 3.0], [3.0, 3.0]])  # honest counts say: the split is noise
    hdp = HDP(iterations=300, seed=0)
    hdp.refit(t, counts, fit_counts=fit)
    p = hdp.node_proba(t, counts)
    assert p[1, 0] > 0.5 > p[2, 0] and np.allclose(p.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"iterations": 0}, "iterations"),
        ({"iterations": 2.5}, "iterations"),
        ({"burn_in": 10, "iterations": 10}, "burn_in"),
        ({"tying": "sibling"}, "tying"),
        ({"concentration": 0.0}, "concentration"),
        ({"prior_rate": -1.0}, "prior_rate"),
        ({"sample_concentration": "yes"}, "sample_concentration"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ConfigError, match=f"'{name}'.*Got"):
        HDP(**kwargs)  # type: ignore[arg-type]


def test_negative_counts_are_an_input_error() -> None:
    with pytest.raises(InputError):
        HDP(iterations=5).refit(_tree([-1, 0]), np.array([[1.0, 0.0], [-1.0, 0.0]]))


@pytest.mark.parametrize("scale", [2e7, 1e12, 1e19])
def test_counts_past_the_customer_cap_are_an_input_error_naming_counts(scale: float) -> None:
    # one customer per unit of count: 1e12 was a MemoryError of 4 PiB, 1e19 wrapped past int64
    # and dropped the examples from the posterior without a word
    counts = np.array([[0.5, 0.5], [0.5, 0.0], [0.0, 0.5]]) * scale
    with pytest.raises(InputError, match=r"seat 2e\+07 customers|seat 1e\+1[29] customers") as caught:
        HDP(iterations=2).refit(_tree([-1, 0, 0]), counts)
    assert caught.value.field == "counts"
    if scale == 2e7:
        HDP(iterations=2).refit(_tree([-1, 0, 0]), counts / 2)  # at the cap: seated
