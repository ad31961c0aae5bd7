"""Counter-based random numbers for the kernels: a draw is a hash of what it is for.

Randomized trees (:class:`~streamtree.forest.ProbabilityForest`) draw at each split attempt:
which features a node may split on, which feature and threshold a random split takes. A
stateful generator would be more state to store, restore and keep in step across batch
boundaries and background trees; instead every draw is a pure function of the tree's seed and
of *where* it is made,

.. math::

    u = \\operatorname{mix}(\\text{seed}, \\text{node}, \\text{attempt}, j) \\cdot 2^{-53}
    \\in [0, 1),

with ``mix`` the SplitMix64 finaliser (Steele, Lea and Flood, 2014) applied to each key in
turn. The same seed and the same examples give the same draws, bit for bit, whatever the
batch boundaries, and a saved model needs nothing more than its seed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["mix", "uniform", "uniforms"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True)
def _splitmix(z):  # type: ignore[no-untyped-def]
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def mix(seed, a, b, c):  # type: ignore[no-untyped-def]
    """A 64-bit hash of four non-negative integers (``uint64``)."""
    z = _splitmix(np.uint64(seed))
    z = _splitmix(z ^ np.uint64(a))
    z = _splitmix(z ^ np.uint64(b))
    return _splitmix(z ^ np.uint64(c))


@njit(cache=True)
def uniform(seed, a, b, c):  # type: ignore[no-untyped-def]
    """A float in ``[0, 1)`` from the 53 high bits of :func:`mix`."""
    return float(mix(seed, a, b, c) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def uniforms(seed, a, first, n, c):  # type: ignore[no-untyped-def]
    """``[uniform(seed, a, first + i, c) for i in range(n)]`` as an array."""
    out = np.empty(n)
    for i in range(n):
        out[i] = uniform(seed, a, first + i, c)
    return out
