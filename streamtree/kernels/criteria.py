"""Split criteria and the Hoeffding test: the merit of a candidate split, and whether to take the best one.

Pure functions of class counts. They compute exactly what the reference
``tests/reference/criteria.py`` computes with numpy: every sum over classes is taken in numpy's
order (its pairwise summation, :func:`~streamtree.kernels.reductions.pairwise`), so the merits
are bit-identical to the reference's given the same class counts. Criteria are passed as
integer codes (:data:`CRITERION_CODES`). The split search that scores candidates with them is
:mod:`streamtree.kernels.split`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.reductions import np_sum

__all__ = [
    "CRITERION_CODES",
    "GINI",
    "HELLINGER",
    "INFO_GAIN",
    "candidate_merit",
    "criterion_range",
    "hoeffding_bound",
    "merit",
    "merit_scratch",
    "split_decision",
    "total_part",
]

INFO_GAIN, GINI, HELLINGER = 0, 1, 2
CRITERION_CODES = {"info_gain": INFO_GAIN, "gini": GINI, "hellinger": HELLINGER}

_SQRT2 = math.sqrt(2.0)
_TINY = 1e-300  # x log2 x is taken at max(x, _TINY): 0 log 0 = 0


# -- helpers ------------------------------------------------------------------------------------
@njit(cache=True)
def _xlogx(x):  # type: ignore[no-untyped-def]
    return x * math.log2(max(x, _TINY))


@njit(cache=True)
def _impurity(c, k, buf, at):  # type: ignore[no-untyped-def]
    """Gini impurity ``1 - sum_k p_k^2`` of counts ``c[:k]`` (``p = 0`` when empty); scratch
    ``buf[at:at + k]``."""
    t = np_sum(c, 0, k)
    for i in range(k):
        p = c[i] / t if t > 0.0 else 0.0
        buf[at + i] = p * p
    return 1.0 - np_sum(buf, at, k)


@njit(cache=True)
def total_part(criterion, total, k, buf):  # type: ignore[no-untyped-def]
    """The part of a merit that depends on ``total`` alone (shared by a feature's candidates):
    ``sum_k T_k log2 T_k`` for information gain, ``G(total)`` for Gini, 0 for Hellinger."""
    if criterion == INFO_GAIN:
        for i in range(k):
            buf[i] = _xlogx(total[i])
        return np_sum(buf, 0, k)
    if criterion == GINI:
        return _impurity(total, k, buf, 0)
    return 0.0


@njit(cache=True)
def candidate_merit(criterion, left, total, k, n, n_left, total_term, buf):  # type: ignore[no-untyped-def]
    """Merit of one candidate given ``n = sum total``, ``n_left = sum left`` and
    ``total_term = total_part(criterion, total, k, buf)``; ``buf`` is scratch of at least ``k * k + 2 * k``.

    The operations and their order are those of the reference ``tests/reference/criteria.py`` (see :func:`merit`).
    """
    if criterion == INFO_GAIN:
        for i in range(k):
            buf[i] = _xlogx(left[i])
            buf[k + i] = _xlogx(max(total[i] - left[i], 0.0))
        inner = np_sum(buf, 0, k) + np_sum(buf, k, k) - total_term
        gain = inner - _xlogx(n_left) - _xlogx(n - n_left) + _xlogx(n)
        return gain / n if n > 0.0 else 0.0
    if criterion == GINI:  # buf[:k] the right counts, buf[k:2k] scratch
        for i in range(k):
            buf[i] = max(total[i] - left[i], 0.0)
        w_left = n_left / n if n > 0.0 else 0.0
        w_right = 1.0 - w_left
        g_left = _impurity(left, k, buf, k)
        g_right = _impurity(buf, k, buf, k)
        return total_term - w_left * g_left - w_right * g_right
    # Hellinger: buf[:k] sqrt f_k, buf[k:2k] sqrt(1 - f_k), buf[2k:2k + k*k] the pair terms
    for i in range(k):
        t = total[i]
        f = left[i] / t if t > 0.0 else 0.0
        buf[i] = math.sqrt(f)
        buf[k + i] = math.sqrt(1.0 - min(f, 1.0))
    at = 2 * k
    n_pairs = 0
    for i in range(k):
        for j in range(k):
            if j > i and total[i] > 0.0 and total[j] > 0.0:
                da = buf[i] - buf[j]
                db = buf[k + i] - buf[k + j]
                buf[at + i * k + j] = math.sqrt(da * da + db * db)
                n_pairs += 1
            else:
                buf[at + i * k + j] = 0.0
    dist = np_sum(buf, at, k * k)
    return dist / n_pairs if n_pairs > 0 else 0.0


@njit(cache=True)
def merit_scratch(k):  # type: ignore[no-untyped-def]
    """Entries of scratch :func:`candidate_merit` needs for ``k`` classes."""
    return k * k + 2 * k


# -- criteria -----------------------------------------------------------------------------------
@njit(cache=True)
def merit(criterion, left, total, n_classes):  # type: ignore[no-untyped-def]
    """Merit of one candidate split (larger is better), as the reference ``tests/reference/criteria.py`` computes it.

    Parameters
    ----------
    criterion : int
        ``INFO_GAIN``, ``GINI`` or ``HELLINGER``.
    left, total : float64[:]
        Class counts on the left of the split and before it; the first ``n_classes`` are used.
    n_classes : int

    Returns
    -------
    float

    Notes
    -----
    With ``R = max(T - L, 0)``, ``n = sum T``, ``n_L = sum L``, ``n_R = n - n_L``,
    ``w_L = n_L / n`` (0 when ``n = 0``) and ``w_R = 1 - w_L``:

    - information gain (bits), with ``x log2 x`` at ``max(x, 1e-300)``:
      ``[sum_k (L_k log2 L_k + R_k log2 R_k - T_k log2 T_k) - n_L log2 n_L - n_R log2 n_R
      + n log2 n] / n`` (0 when ``n = 0``);
    - Gini: ``G(T) - w_L G(L) - w_R G(R)`` with ``G(c) = 1 - sum_k (c_k / sum c)^2``;
    - Hellinger: with ``f_k = L_k / T_k`` (0 when ``T_k = 0``), the mean over pairs ``i < j``
      of classes present (``T > 0``) of ``sqrt((sqrt f_i - sqrt f_j)^2 +
      (sqrt(1 - f_i) - sqrt(1 - f_j))^2)`` (0 without a pair).

    Sums over classes are in numpy's order, so the result is bit-identical to
    ``criteria.CRITERIA[name](left, total)``.
    """
    buf = np.empty(merit_scratch(n_classes))
    n = np_sum(total, 0, n_classes)
    n_left = np_sum(left, 0, n_classes)
    term = total_part(criterion, total, n_classes, buf)
    return candidate_merit(criterion, left, total, n_classes, n, n_left, term, buf)


@njit(cache=True)
def criterion_range(criterion, n_classes):  # type: ignore[no-untyped-def]
    """Width ``R`` of a criterion's range (``criteria.RANGES``).

    Notes
    -----
    ``log2 max(K, 2)`` for information gain, 1 for Gini, ``sqrt 2`` for Hellinger.
    """
    if criterion == INFO_GAIN:
        return math.log2(max(n_classes, 2))
    if criterion == GINI:
        return 1.0
    return _SQRT2


@njit(cache=True)
def hoeffding_bound(range_, delta, n):  # type: ignore[no-untyped-def]
    """Hoeffding bound on the error of a mean of ``n`` observations of range ``range_``.

    Notes
    -----
    .. math:: \\epsilon = \\sqrt{\\frac{R^2 \\ln(1/\\delta)}{2n}}

    (the same operations as ``criteria.hoeffding_bound``).
    """
    return math.sqrt(range_ * range_ * math.log(1.0 / delta) / (2.0 * n))


@njit(cache=True)
def split_decision(merit, second, criterion, n_classes, delta, tau, n, relative):  # type: ignore[no-untyped-def]
    """The Hoeffding test of a leaf's best split (``ProbabilityTree._attempt_split``).

    Parameters
    ----------
    merit, second : float
        The best split's merit and the best merit among the other features (0 without any).
    criterion, n_classes : int
        Give the merit's range ``R`` (:func:`criterion_range`).
    delta, tau : float
        Confidence and tie threshold.
    n : float
        Examples the leaf has seen (``slot_seen[slot, SEEN]``).
    relative : bool
        Whether ``tau`` is in units of the range ``R`` (``tau_scale="range"``): the tie rule is
        then ``eps < tau R``, that is ``sqrt(ln(1/delta) / (2 n)) < tau``, the same number of
        examples for any class count; otherwise ``eps < tau`` (``"absolute"``, river's).

    Returns
    -------
    bool

    Notes
    -----
    Split when ``merit > 0`` and ``(merit - second > eps or eps < t)`` with
    ``eps = sqrt(R^2 ln(1/delta) / (2 n))`` and ``t = tau R`` (relative) or ``tau``.
    """
    if not merit > 0.0:
        return False
    range_ = criterion_range(criterion, n_classes)
    eps = hoeffding_bound(range_, delta, n)
    return merit - second > eps or eps < (tau * range_ if relative else tau)
