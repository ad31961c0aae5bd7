"""Closed-form leaf estimators: MLE, Laplace and M-estimation.

Each reads only the counts of the node itself:

- MLE: ``n[l, k] / n[l, .]``;
- Laplace: ``(n[l, k] + 1) / (n[l, .] + K)``;
- M-estimation: ``(n[l, k] + m b[k]) / (n[l, .] + m)`` with base rate ``b`` uniform
  (``1/K``) or the root's distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np

from streamtree.exceptions import ConfigError
from streamtree.kernels import smoothing as kernel_codes
from streamtree.smoothing.base import Smoother
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["MLE", "Laplace", "MEstimate"]


def _uniform_rows(n: int, k: int) -> FloatArray:
    return np.full((n, k), 1.0 / k) if k else np.zeros((n, 0))


class MLE(Smoother):
    """Relative frequencies at the node.

    A node with no counts yet takes the estimate of its nearest ancestor that has counts, and a
    tree with no counts at all the uniform distribution: the MLE is undefined there and this is
    what the tree would predict from the data it has. Absent classes get exactly 0.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0, 0]))
    >>> MLE().node_proba(t, np.array([[3., 1.], [3., 0.], [0., 0.]])).tolist()
    [[0.75, 0.25], [1.0, 0.0], [0.75, 0.25]]
    """

    name: ClassVar[str] = "mle"
    code: ClassVar[int] = kernel_codes.MLE
    strictly_positive: ClassVar[bool] = False

    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        counts = np.asarray(counts, dtype=np.float64)
        s, k = counts.shape
        total = counts.sum(axis=1, keepdims=True)
        out = np.divide(counts, total, out=_uniform_rows(s, k), where=total > 0)
        for nodes in topology.levels[1:]:  # empty nodes inherit from the parent, top-down
            empty = nodes[total[nodes, 0] <= 0]
            out[empty] = out[topology.parent[empty]]
        return out

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        for node in reversed(path):
            row = counts[int(node)]
            total = row.sum()
            if total > 0:
                return row / total
        return _uniform_rows(1, counts.shape[1])[0]


class Laplace(Smoother):
    """Laplace's rule of succession ``(n[l, k] + 1) / (n[l, .] + K)``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> Laplace().node_proba(Topology.from_parent(np.array([-1])), np.array([[2., 0.]])).tolist()
    [[0.75, 0.25]]
    """

    name: ClassVar[str] = "laplace"
    code: ClassVar[int] = kernel_codes.LAPLACE

    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        counts = np.asarray(counts, dtype=np.float64)
        return (counts + 1.0) / (counts.sum(axis=1, keepdims=True) + counts.shape[1])

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        row = counts[int(path[-1])]
        return (row + 1.0) / (row.sum() + row.shape[0])


class MEstimate(Smoother):
    """M-estimation ``(n[l, k] + m b[k]) / (n[l, .] + m)``.

    Parameters
    ----------
    m
        Weight of the base rate, in pseudo-examples (> 0).
    base
        ``"uniform"`` for ``b = 1/K`` (the paper's setting, Laplace when ``m = K``) or
        ``"root"`` for the root node's relative frequencies.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0]))
    >>> MEstimate(m=2.0, base="root").node_proba(t, np.array([[3., 1.], [1., 0.]]))[1].tolist()
    [0.8333333333333334, 0.16666666666666666]
    """

    name: ClassVar[str] = "mestimate"
    code: ClassVar[int] = kernel_codes.MESTIMATE

    def __init__(self, m: float = 1.0, base: Literal["uniform", "root"] = "uniform") -> None:
        if not (isinstance(m, (int, float)) and np.isfinite(m) and m > 0):
            raise ConfigError(f"The 'm' parameter of MEstimate must be a float > 0. Got {m!r} instead.")
        if base not in ("uniform", "root"):
            raise ConfigError(f"The 'base' parameter of MEstimate must be 'uniform' or 'root'. Got {base!r} instead.")
        self.m = float(m)
        self.base = base

    def _base_rate(self, counts: FloatArray) -> FloatArray:
        k = counts.shape[1]
        if self.base == "root" and counts.shape[0] and counts[0].sum() > 0:
            return counts[0] / counts[0].sum()
        return np.full(k, 1.0 / k) if k else np.zeros(0)

    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        counts = np.asarray(counts, dtype=np.float64)
        b = self._base_rate(counts)
        return (counts + self.m * b) / (counts.sum(axis=1, keepdims=True) + self.m)

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        row = counts[int(path[-1])]
        return (row + self.m * self._base_rate(counts)) / (row.sum() + self.m)

    def __repr__(self) -> str:
        return f"MEstimate(m={self.m!r}, base={self.base!r})"
