"""Closed-form and recursive smoothers: valid distributions and path == table, on random trees."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtree.smoothing import SMOOTHERS
from streamtree.topology import Topology

CLOSED = ["mle", "laplace", "mestimate", "mbranch", "hgs"]


@st.composite
def trees(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 25))
    k = draw(st.integers(1, 4))
    parent = np.array([-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)])
    counts = np.zeros((n, k))
    for i in range(n - 1, -1, -1):
        counts[i] += np.array([draw(st.integers(0, 5)) for _ in range(k)], dtype=float)
        if parent[i] >= 0:
            counts[parent[i]] += counts[i]
    return parent, counts


@pytest.mark.parametrize("name", CLOSED)
@given(tree=trees())
def test_distributions_are_valid_and_path_matches_table(name: str, tree: tuple[np.ndarray, np.ndarray]) -> None:
    parent, counts = tree
    topology = Topology.from_parent(parent)
    smoother = SMOOTHERS[name]()
    smoother.refit(topology, counts)
    table = smoother.node_proba(topology, counts)
    np.testing.assert_allclose(table.sum(axis=1), 1.0, rtol=1e-9)
    assert np.all(table >= 0)
    if smoother.strictly_positive:
        assert np.all(table > 0)
    for node in range(len(parent)):
        path = [node]
        while parent[path[0]] >= 0:
            path.insert(0, int(parent[path[0]]))
        np.testing.assert_allclose(smoother.path_proba(parent, counts, path), table[node], rtol=1e-9, atol=1e-12)


def test_laplace_and_mestimate_by_hand() -> None:
    topology = Topology.from_parent(np.array([-1]))
    counts = np.array([[3.0, 1.0, 0.0]])
    assert SMOOTHERS["laplace"]().node_proba(topology, counts).tolist() == [[4 / 7, 2 / 7, 1 / 7]]
    np.testing.assert_allclose(
        SMOOTHERS["mestimate"]().node_proba(topology, counts), [[(3 + 1 / 3) / 5, (1 + 1 / 3) / 5, (1 / 3) / 5]]
    )


def test_mbranch_on_a_deep_caterpillar_matches_each_branch() -> None:
    # scikit-learn grows such trees from alternating labels on one feature: the table was one
    # numpy pass per (target depth, level), minutes at depth 2,000; now one walk in preorder
    depth = 400
    parent = np.r_[-1, np.repeat(np.arange(0, 2 * depth - 1, 2), 2)]  # node 2i+1 a leaf, 2i+2 goes on
    n = parent.size
    counts = np.zeros((n, 2))
    counts[1::2, 0] = 1.0
    counts[-1] = [0.0, 1.0]
    for i in range(n - 1, 0, -1):
        counts[parent[i]] += counts[i]
    topology = Topology.from_parent(parent)
    assert int(topology.depth.max()) == depth
    smoother = SMOOTHERS["mbranch"]()
    table = smoother.node_proba(topology, counts)
    for node in (0, 1, n // 2, n - 2, n - 1):
        path = [node]
        while parent[path[0]] >= 0:
            path.insert(0, int(parent[path[0]]))
        np.testing.assert_allclose(smoother.path_proba(parent, counts, path), table[node], rtol=1e-12)
