"""Random trees laid out as the kernels see them (:mod:`streamtree.state`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class RandomTree(NamedTuple):
    """A tree of ``n`` nodes and ``k`` classes, exact (``parent``, ``internal``, ``counts``)
    and padded the way the tree's growable arrays are (``*_cap``: more rows and columns than
    in use, filled with NaN or junk that a kernel must never read)."""

    parent: np.ndarray
    internal: np.ndarray
    counts: np.ndarray
    parent_cap: np.ndarray
    internal_cap: np.ndarray
    counts_cap: np.ndarray

    @property
    def n(self) -> int:
        return int(self.parent.shape[0])

    @property
    def k(self) -> int:
        return int(self.counts.shape[1])

    def path(self, node: int) -> np.ndarray:
        """Root-to-node path."""
        path = [node]
        while self.parent[path[-1]] >= 0:
            path.append(int(self.parent[path[-1]]))
        return np.array(path[::-1], dtype=np.int64)


def random_tree(
    rng: np.random.Generator, n_splits: int, n_classes: int, *, empty_leaves: float = 0.15, fractional: bool = False
) -> RandomTree:
    """A binary tree grown by splitting random leaves (so ``parent[i] < i``), with leaf counts
    in 0..5 per class (some leaves empty) and internal counts the sum of their children's plus
    a few examples that stopped there; ``fractional`` scales every node's own examples by a
    random factor in (0.25, 1], as a decayed tree's counts are."""
    parent = [-1]
    leaves = [0]
    for _ in range(n_splits):
        leaf = leaves.pop(int(rng.integers(len(leaves))))
        parent += [leaf, leaf]
        leaves += [len(parent) - 2, len(parent) - 1]
    n = len(parent)
    parent_arr = np.array(parent, dtype=np.int64)
    internal = np.zeros(n, dtype=bool)
    internal[parent_arr[1:]] = True
    counts = np.zeros((n, n_classes))
    for i in range(n - 1, -1, -1):
        if internal[i]:
            own = rng.integers(0, 3, n_classes) * float(rng.random() < 0.4)
        else:
            own = rng.integers(0, 6, n_classes) * float(rng.random() >= empty_leaves)
        if fractional:
            own = own * rng.uniform(0.25, 1.0)
        counts[i] += own
        if parent_arr[i] >= 0:
            counts[parent_arr[i]] += counts[i]
    extra_rows, extra_cols = int(rng.integers(0, 5)), int(rng.integers(0, 3))
    parent_cap = np.full(n + extra_rows, 10**9, dtype=np.int64)
    parent_cap[:n] = parent_arr
    internal_cap = np.ones(n + extra_rows, dtype=bool)
    internal_cap[:n] = internal
    counts_cap = np.full((n + extra_rows, n_classes + extra_cols), np.nan)
    counts_cap[:n, :n_classes] = counts
    return RandomTree(parent_arr, internal, counts, parent_cap, internal_cap, counts_cap)
