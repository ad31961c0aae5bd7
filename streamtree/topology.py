"""Index structures derived from a tree's ``parent`` array.

A tree here is the array ``parent`` (``parent[root] = -1``) with every parent index smaller
than its children's (nodes are appended as they are created). From it this module derives,
with numpy passes per depth level (never per node in Python):

- ``depth`` and ``levels`` (the nodes of each depth), for top-down and bottom-up passes;
- ``is_leaf``;
- a depth-first preorder ``order`` with, for every node, the half-open range
  ``[start[i], end[i])`` of preorder positions its subtree occupies. Subtree sums then become
  differences of one cumulative sum, and sums over a node's ancestors one cumulative sum of
  ``+x`` at ``start`` and ``-x`` at ``end``: both O(S) with no loop at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from streamtree.typing import FloatArray, IntArray

__all__ = ["Topology"]


@dataclass(frozen=True)
class Topology:
    """Derived indexes of a tree given by its parent array.

    Examples
    --------
    >>> import numpy as np
    >>> t = Topology.from_parent(np.array([-1, 0, 0, 1, 1]))
    >>> t.depth.tolist(), t.is_leaf.tolist()
    ([0, 1, 1, 2, 2], [False, False, True, True, True])
    >>> t.subtree_sum(np.array([0., 0., 1., 1., 1.])).tolist()
    [3.0, 2.0, 1.0, 1.0, 1.0]
    >>> t.ancestor_sum(np.array([10., 1., 0., 0., 0.])).tolist()
    [0.0, 10.0, 10.0, 11.0, 11.0]
    """

    parent: IntArray
    depth: IntArray
    levels: tuple[IntArray, ...]
    is_leaf: np.ndarray
    order: IntArray  # order[j] = the node at preorder position j
    start: IntArray  # preorder position of each node
    end: IntArray  # one past the last preorder position of its subtree
    by_end: IntArray  # preorder positions of the nodes, sorted by the end of their subtree
    ended_before: IntArray  # at preorder position j: how many subtrees end at or before j
    end_preorder: IntArray  # end of the node at each preorder position

    @classmethod
    def from_parent(cls, parent: IntArray) -> Topology:
        parent = np.asarray(parent, dtype=np.int64)
        if parent.ndim != 1:  # a (2, 1) array never converged in the depth loop below: a hang
            raise ValueError(f"parent must be a 1-D array of node indices; got an array of shape {parent.shape}")
        n = parent.shape[0]
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls(parent, empty, (), np.zeros(0, bool), empty, empty, empty, empty, empty, empty)
        if parent[0] != -1 or (n > 1 and np.any(parent[1:] >= np.arange(1, n))) or np.any(parent[1:] < 0):
            raise ValueError("parent must have parent[0] == -1 and 0 <= parent[i] < i for every other node")
        # depth: repeat depth[i] = depth[parent[i]] + 1 until it stops changing (depth + 1 passes)
        depth = np.zeros(n, dtype=np.int64)
        while True:
            below = depth[parent[1:]] + 1
            if np.array_equal(below, depth[1:]):
                break
            depth[1:] = below
        max_depth = int(depth.max())
        by_depth = np.argsort(depth, kind="stable")
        bounds = np.searchsorted(depth[by_depth], np.arange(max_depth + 2))
        levels = tuple(by_depth[bounds[d] : bounds[d + 1]] for d in range(max_depth + 1))
        n_children = np.bincount(parent[1:], minlength=n)
        is_leaf = n_children == 0
        # subtree sizes bottom-up, one level at a time
        size = np.ones(n, dtype=np.int64)
        for d in range(max_depth, 0, -1):
            nodes = levels[d]
            np.add.at(size, parent[nodes], size[nodes])
        # preorder start: start[child] = start[parent] + 1 + sizes of earlier siblings
        start = np.zeros(n, dtype=np.int64)
        for d in range(1, max_depth + 1):
            nodes = levels[d]  # ascending node index, so siblings are in creation order
            nodes = nodes[np.argsort(parent[nodes], kind="stable")]
            sz = size[nodes]
            csum = np.cumsum(sz) - sz  # exclusive cumsum over the level
            par = parent[nodes]
            first = np.r_[True, par[1:] != par[:-1]]
            group_base = np.maximum.accumulate(np.where(first, csum, 0))
            start[nodes] = start[par] + 1 + (csum - group_base)
        order = np.empty(n, dtype=np.int64)
        order[start] = np.arange(n)
        end = start + size
        by_end = np.argsort(end, kind="stable")
        ended_before = np.searchsorted(end[by_end], np.arange(n), side="right")
        by_end = start[by_end]
        return cls(parent, depth, levels, is_leaf, order, start, end, by_end, ended_before, end[order])

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    # Preorder space: position j holds node order[j]; a subtree is a contiguous range.
    def to_preorder(self, values: np.ndarray) -> np.ndarray:
        """Values per node rearranged by preorder position."""
        return np.take(values, self.order, axis=0)

    def from_preorder(self, values: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`to_preorder`."""
        return np.take(values, self.start, axis=0)

    def preorder_subtree_sum_rows(self, values: FloatArray) -> FloatArray:
        """:meth:`subtree_sum` of each row of ``(R, S)`` values, in preorder space (rows,
        contiguous, are faster to sum than ``(S, R)`` columns for small ``R``)."""
        csum = np.zeros((values.shape[0], values.shape[1] + 1))
        np.cumsum(values, axis=1, out=csum[:, 1:])
        return csum.take(self.end_preorder, axis=1) - csum[:, :-1]

    def preorder_ancestor_sum_rows(self, values: FloatArray) -> FloatArray:
        """:meth:`ancestor_sum` of each row of ``(R, S)`` values, in preorder space.

        Position ``j`` is below node ``p`` when ``start[p] <= j < end[p]``: the sum over nodes
        started at or before ``j`` minus the sum over nodes whose subtree ended at or before it.
        """
        started = np.cumsum(values, axis=1)
        ended = np.zeros((values.shape[0], values.shape[1] + 1))
        np.cumsum(values.take(self.by_end, axis=1), axis=1, out=ended[:, 1:])
        return started - ended.take(self.ended_before, axis=1) - values

    def _by_node(self, values: FloatArray, rows_sum: Callable[[FloatArray], FloatArray]) -> FloatArray:
        """Apply a preorder row sum to ``(S,)`` or ``(S, K)`` values given per node."""
        values = np.asarray(values, dtype=np.float64)
        rows = np.ascontiguousarray(self.to_preorder(values).reshape(values.shape[0], -1).T)
        return self.from_preorder(rows_sum(rows).T.reshape(values.shape))

    def subtree_sum(self, values: FloatArray) -> FloatArray:
        """Sum of ``values`` over each node's subtree (the node included); (S,) or (S, K)."""
        return self._by_node(values, self.preorder_subtree_sum_rows)

    def ancestor_sum(self, values: FloatArray) -> FloatArray:
        """Sum of ``values`` over each node's strict ancestors; (S,) or (S, K)."""
        return self._by_node(values, self.preorder_ancestor_sum_rows)
