"""The path probability kernel against each Smoother's own ``path_proba`` and ``node_proba``
(the numpy oracles), on random trees with padded arrays."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from streamtree.kernels import smoothing as ks
from streamtree.kernels.hgs import sync_alpha
from streamtree.smoothing import HGS, MLE, Laplace, MBranch, MEstimate, Smoother
from streamtree.state import HGS_COLUMNS, THETA
from streamtree.topology import Topology
from tests.kernels.trees import RandomTree, random_tree

RTOL = 1e-12


def hgs_arrays(rng: np.random.Generator, tree: RandomTree) -> tuple[np.ndarray, float, HGS]:
    """Random online HGS weights as a padded ``hgs`` array and the equivalent HGS smoother."""
    hgs = np.full((tree.counts_cap.shape[0], HGS_COLUMNS), np.nan)
    hgs[: tree.n, :3] = rng.uniform(-3.0, 3.0, (tree.n, 3))
    sync_alpha(hgs, tree.n)  # the weights, as a refit keeps them
    theta0 = float(rng.uniform(-3.0, 3.0))
    smoother = HGS()
    smoother.set_state(
        {
            "theta": hgs[: tree.n, 0],
            "step": hgs[: tree.n, 1],
            "grad": hgs[: tree.n, 2],
            "theta0": theta0,
            "step0": 0.1,
            "grad0": 0.0,
            "n_refits": 0,
        }
    )
    return hgs, theta0, smoother


def kernel_path_proba(
    code: int, tree: RandomTree, node: int, *, m: float = 1.0, hgs: np.ndarray | None = None, theta0: float = 0.0
) -> np.ndarray:
    """The kernel at ``node``, reading padded arrays and a path buffer longer than the path."""
    path = tree.path(node)
    buffer = np.full(path.shape[0] + 3, 10**9, dtype=np.int64)
    buffer[: path.shape[0]] = path
    out = np.full(tree.k + 2, -7.0)
    if hgs is None:
        hgs = np.full((tree.counts_cap.shape[0], HGS_COLUMNS), np.nan)
    ks.path_proba(code, m, tree.counts_cap, hgs, theta0, buffer, path.shape[0], tree.k, out)
    assert np.all(out[tree.k :] == -7.0)  # nothing written past K
    return out[: tree.k]


CLOSED_FORMS = [
    (ks.MLE, lambda: MLE(), 1.0),
    (ks.LAPLACE, lambda: Laplace(), 1.0),
    (ks.MESTIMATE, lambda: MEstimate(m=2.5), 2.5),
    (ks.MESTIMATE, lambda: MEstimate(m=0.3), 0.3),
    (ks.MBRANCH, lambda: MBranch(), 1.0),
]


@pytest.mark.parametrize(("code", "make", "m"), CLOSED_FORMS)
@pytest.mark.parametrize("seed", range(12))
def test_closed_forms_match_the_smoothers(code: int, make: Callable[[], Smoother], m: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, int(rng.integers(0, 25)), int(rng.integers(1, 7)), fractional=seed % 3 == 0)
    smoother = make()
    table = smoother.node_proba(Topology.from_parent(tree.parent), tree.counts)
    for node in range(tree.n):
        got = kernel_path_proba(code, tree, node, m=m)
        np.testing.assert_allclose(got, smoother.path_proba(tree.parent, tree.counts, tree.path(node)), rtol=RTOL)
        np.testing.assert_allclose(got, table[node], rtol=RTOL, atol=1e-15)


@pytest.mark.parametrize("seed", range(20))
def test_hgs_matches_the_smoother(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    tree = random_tree(rng, int(rng.integers(0, 30)), int(rng.integers(1, 7)), fractional=seed % 2 == 1)
    hgs, theta0, smoother = hgs_arrays(rng, tree)
    table = smoother.node_proba(Topology.from_parent(tree.parent), tree.counts)
    for node in range(tree.n):
        got = kernel_path_proba(ks.HGS, tree, node, hgs=hgs, theta0=theta0)
        np.testing.assert_allclose(got, smoother.path_proba(tree.parent, tree.counts, tree.path(node)), rtol=RTOL)
        np.testing.assert_allclose(got, table[node], rtol=1e-10)
        assert np.all(got > 0) and math.isclose(got.sum(), 1.0, rel_tol=1e-12)


def test_mle_backs_off_to_the_nearest_ancestor_with_counts_and_is_not_floored() -> None:
    # the tree: node 0 the root, 1 and 2 its children, 3 and 4 node 2's
    counts = np.array([[3.0, 1.0, 0.0], [2.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    out = np.empty(3)
    ks.path_proba(ks.MLE, 1.0, counts, np.zeros((5, 3)), 0.0, np.array([0, 2, 3]), 3, 3, out)
    assert out.tolist() == [0.5, 0.5, 0.0]  # node 3 is empty: its parent's estimate
    ks.path_proba(ks.MLE, 1.0, counts, np.zeros((5, 3)), 0.0, np.array([0, 1]), 2, 3, out)
    assert out.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("code", [ks.MLE, ks.LAPLACE, ks.MESTIMATE, ks.MBRANCH, ks.HGS])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_a_tree_without_counts_predicts_uniform(code: int, k: int) -> None:
    out = np.empty(k)
    ks.path_proba(code, 2.0, np.zeros((1, k)), np.zeros((1, HGS_COLUMNS)), 0.0, np.zeros(1, dtype=np.int64), 1, k, out)
    np.testing.assert_allclose(out, np.full(k, 1.0 / k), rtol=RTOL)


def test_hgs_ancestors_without_counts_get_no_weight() -> None:
    # root and node 1 have no counts: node 3 is its own counts plus the pseudo-node
    counts = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [3.0, 1.0]])
    hgs = np.zeros((4, HGS_COLUMNS))
    hgs[:, THETA] = math.log(5.0)
    sync_alpha(hgs, 4)
    out = np.empty(2)
    ks.path_proba(ks.HGS, 1.0, counts, hgs, math.log(2.0), np.array([0, 1, 3]), 3, 2, out)
    np.testing.assert_allclose(out, [(3.0 + 1.0) / (4.0 + 2.0), (1.0 + 1.0) / (4.0 + 2.0)], rtol=RTOL)


def test_unknown_smoother_code_raises() -> None:
    with pytest.raises(ValueError, match="unknown smoother"):
        ks.path_proba(
            99, 1.0, np.ones((1, 2)), np.zeros((1, HGS_COLUMNS)), 0.0, np.zeros(1, dtype=np.int64), 1, 2, np.empty(2)
        )
