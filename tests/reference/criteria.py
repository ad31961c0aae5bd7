"""Split criteria and the Hoeffding bound, vectorised over candidate splits.

Every criterion takes the class counts on the left of each candidate split, ``left[..., K]``,
and the class counts before the split, ``total[..., K]`` (broadcastable), and returns the
merit of each candidate (larger is better); ``RANGES`` gives the width ``R`` of the merit's
range for ``K`` classes, which the Hoeffding bound needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from streamtree.typing import FloatArray

__all__ = ["CRITERIA", "RANGES", "gini", "hellinger", "hoeffding_bound", "info_gain"]


def _xlogx(x: FloatArray) -> FloatArray:
    """``x log2 x`` elementwise, with ``0 log 0 = 0``."""
    return x * np.log2(np.maximum(x, 1e-300))


def _side_weights(left: FloatArray, total: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    right = np.maximum(total - left, 0.0)
    n = total.sum(axis=-1)
    n_left = left.sum(axis=-1)
    w_left = np.divide(n_left, n, out=np.zeros_like(n_left), where=n > 0)
    return right, w_left, 1.0 - w_left


def info_gain(left: FloatArray, total: FloatArray) -> FloatArray:
    """Information gain in bits: ``H(total) - w_L H(left) - w_R H(right)``.

    Notes
    -----
    With ``H(c) = log2 n - (1/n) sum_k c_k log2 c_k`` for counts ``c`` summing to ``n``,
    the gain is ``(1/n) [ sum_k (L_k log L_k + R_k log R_k - T_k log T_k)
    - n_L log n_L - n_R log n_R + n log n ]``: one pass of ``x log x`` per side.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(info_gain(np.array([5., 0.]), np.array([5., 5.]))), 12)
    1.0
    """
    right = np.maximum(total - left, 0.0)
    n = total.sum(axis=-1)
    n_left = left.sum(axis=-1)
    inner = _xlogx(left).sum(axis=-1) + _xlogx(right).sum(axis=-1) - _xlogx(total).sum(axis=-1)
    gain = inner - _xlogx(n_left) - _xlogx(n - n_left) + _xlogx(n)
    return np.divide(gain, n, out=np.zeros_like(gain), where=n > 0)


def gini(left: FloatArray, total: FloatArray) -> FloatArray:
    """Decrease of Gini impurity ``G(p) = 1 - sum_k p_k^2``.

    Examples
    --------
    >>> import numpy as np
    >>> float(gini(np.array([5., 0.]), np.array([5., 5.])))
    0.5
    """

    def impurity(c: FloatArray) -> FloatArray:
        t = c.sum(axis=-1, keepdims=True)
        p = np.divide(c, t, out=np.zeros_like(c), where=t > 0)
        return 1.0 - np.sum(p * p, axis=-1)

    right, w_left, w_right = _side_weights(left, total)
    return impurity(np.broadcast_to(total, left.shape)) - w_left * impurity(left) - w_right * impurity(right)


def hellinger(left: FloatArray, total: FloatArray) -> FloatArray:
    """Hellinger distance between the two sides' class-conditional splits (Cieslak et al., 2012).

    For class ``k`` the split sends a fraction ``f_k = left_k / total_k`` of its examples left;
    for two classes the distance is ``sqrt((sqrt(f_0) - sqrt(f_1))^2 +
    (sqrt(1 - f_0) - sqrt(1 - f_1))^2)``. With more classes we average it over every pair of
    classes present, which keeps the range ``[0, sqrt(2)]`` and the criterion's insensitivity
    to class skew (it reads only within-class fractions).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(hellinger(np.array([5., 0.]), np.array([5., 5.]))), 6)
    1.414214
    """
    total_b = np.broadcast_to(total, left.shape)
    f = np.divide(left, total_b, out=np.zeros_like(left), where=total_b > 0)
    present = total_b > 0
    a, b = np.sqrt(f), np.sqrt(1.0 - np.minimum(f, 1.0))
    # pairwise over classes: (..., K, 1) against (..., 1, K)
    d = (a[..., :, None] - a[..., None, :]) ** 2 + (b[..., :, None] - b[..., None, :]) ** 2
    pair = present[..., :, None] & present[..., None, :]
    k = left.shape[-1]
    upper = np.triu(np.ones((k, k), dtype=bool), 1)
    pair = pair & upper
    n_pairs = pair.sum(axis=(-1, -2))
    dist = np.sqrt(np.where(pair, d, 0.0)).sum(axis=(-1, -2))
    return np.divide(dist, n_pairs, out=np.zeros_like(dist), where=n_pairs > 0)


CRITERIA: dict[str, Callable[[FloatArray, FloatArray], FloatArray]] = {
    "info_gain": info_gain,
    "gini": gini,
    "hellinger": hellinger,
}

RANGES: dict[str, Callable[[int], float]] = {
    "info_gain": lambda k: math.log2(max(k, 2)),
    "gini": lambda k: 1.0,
    "hellinger": lambda k: math.sqrt(2.0),
}


def hoeffding_bound(range_: float, delta: float, n: float) -> float:
    """Hoeffding bound on the error of a mean of ``n`` observations.

    Notes
    -----
    With probability at least ``1 - delta``, the mean of ``n`` independent observations of a
    variable with range ``R`` is within ``epsilon`` of its expectation:

    .. math:: \\epsilon = \\sqrt{\\frac{R^2 \\ln(1/\\delta)}{2n}}

    Examples
    --------
    >>> round(hoeffding_bound(1.0, 1e-7, 200), 4)
    0.2007
    """
    return math.sqrt(range_ * range_ * math.log(1.0 / delta) / (2.0 * n))
