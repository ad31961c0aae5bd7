"""Topology: derived indexes against a slow walk up the parent array."""

from __future__ import annotations

import numpy as np
import pytest

from streamtree.topology import Topology


def ancestors(parent: np.ndarray, i: int) -> list[int]:
    out = []
    p = parent[i]
    while p >= 0:
        out.append(int(p))
        p = parent[p]
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 60, 400])
@pytest.mark.parametrize("seed", [0, 1])
def test_sums_depth_and_leaves_match_a_slow_walk(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    parent = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    topology = Topology.from_parent(parent)
    values = rng.random((n, 3))
    anc = [ancestors(parent, i) for i in range(n)]
    np.testing.assert_allclose(topology.ancestor_sum(values), [values[a].sum(axis=0) for a in anc], atol=1e-12)
    below = [[j for j in range(n) if j == i or i in anc[j]] for i in range(n)]
    np.testing.assert_allclose(topology.subtree_sum(values[:, 0]), [values[b, 0].sum() for b in below], atol=1e-12)
    assert topology.depth.tolist() == [len(a) for a in anc]
    assert topology.is_leaf.tolist() == [i not in set(parent.tolist()) for i in range(n)]
    rows = topology.to_preorder(values).T
    np.testing.assert_allclose(
        topology.preorder_ancestor_sum_rows(rows), topology.to_preorder(topology.ancestor_sum(values)).T, atol=1e-12
    )
    np.testing.assert_allclose(
        topology.preorder_subtree_sum_rows(rows), topology.to_preorder(topology.subtree_sum(values)).T, atol=1e-12
    )


def test_invalid_parent_arrays_are_rejected() -> None:
    with pytest.raises(ValueError, match="parent"):
        Topology.from_parent(np.array([0, 0]))
    with pytest.raises(ValueError, match="parent"):
        Topology.from_parent(np.array([-1, 2, 0]))
