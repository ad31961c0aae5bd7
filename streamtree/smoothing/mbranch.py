"""M-branch smoothing (Ferri, Flach and Hernández-Orallo, 2003), as used in the HGS paper.

Along the branch ``v_1 (root), ..., v_L`` of the node being predicted, each node is an
m-estimate whose base rate is its parent's smoothed estimate:

.. math::

    \\theta_1 = \\frac{n_1 + m_1 / K}{n_{1.} + m_1}, \\qquad
    \\theta_j = \\frac{n_j + m_j \\theta_{j-1}}{n_{j.} + m_j},

with :math:`m_j = 1 + (1 - 1/h_j)\\sqrt{N}`, :math:`h_j = L - j + 1` the height of
:math:`v_j` above the predicted node (the node itself has :math:`h = 1`, so :math:`m = 1`) and
:math:`N` the number of examples at the root. This follows the authors' code as read in our
notes; the root is smoothed toward uniform.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from streamtree.kernels import smoothing as kernel_codes
from streamtree.smoothing.base import Smoother
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["MBranch"]


class MBranch(Smoother):
    """Recursive m-estimation from the root down the predicted node's branch.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0, 0]))
    >>> p = MBranch().node_proba(t, np.array([[8., 8.], [7., 1.], [1., 7.]]))
    >>> bool(p[1, 0] > 0.5 > p[2, 0]), np.allclose(p.sum(axis=1), 1.0)
    (True, True)
    """

    name: ClassVar[str] = "mbranch"
    code: ClassVar[int] = kernel_codes.MBRANCH

    @staticmethod
    def _m(height: FloatArray | float, n_root: float) -> FloatArray | float:
        return 1.0 + (1.0 - 1.0 / height) * np.sqrt(n_root)

    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        # every branch is its own top-down pass (the heights depend on the branch's end), so
        # the table is one compiled walk in preorder: O(sum of depths), not O(depth**2) numpy calls
        counts = np.ascontiguousarray(counts, dtype=np.float64)
        s, k = counts.shape
        out = np.empty((s, k))
        if s == 0 or k == 0:
            return out
        no_hgs = np.empty((0, 0))  # not read by MBRANCH
        kernel_codes.every_node_proba(
            kernel_codes.MBRANCH, 1.0, counts, no_hgs, 0.0, topology.order, topology.depth, k, out
        )
        return out

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        k = counts.shape[1]
        n_root = counts[0].sum()
        theta = np.full(k, 1.0 / k)
        length = len(path)
        for j, node in enumerate(path):
            row = counts[int(node)]
            m = self._m(length - j, n_root)
            theta = (row + m * theta) / (row.sum() + m)
        return theta
