"""The split search: the best split of a leaf by a criterion, or a random one.

Pure functions of the slot arrays of :mod:`streamtree.state` (``num_stats``, ``num_range``,
``nom_stats``, ``shift``), split statistics kept by :mod:`streamtree.kernels.leaf_stats` and
scored by the criteria of :mod:`streamtree.kernels.criteria`. They compute exactly what the
reference ``LeafStats.best_split`` (``tests/reference/observers.py``) computes with numpy; only
the normal CDF (libm ``erf``/``erfc`` here, cephes in scipy's ``ndtr``) may differ in the last
bit, which moves a numeric candidate's merit by about ``1e-16``.

Nothing here allocates in a loop: :func:`best_split` takes one scratch array per call (only a
sum of more than 128 terms, which Hellinger with 12 or more classes needs, allocates the small
stack of its pairwise summation).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.borrow import borrow, hold
from streamtree.kernels.criteria import (
    candidate_merit,
    merit_scratch,
    total_part,
)
from streamtree.kernels.leaf_stats import splittable, value_seen
from streamtree.kernels.reductions import np_sum
from streamtree.state import MAX, MIN, N_, NOMINAL, NUMERIC, Q_, S_

__all__ = [
    "best_split",
    "random_split",
]

_SQRT1_2 = math.sqrt(0.5)  # M_SQRT1_2


@njit(cache=True)
def _ndtr(z):  # type: ignore[no-untyped-def]
    """Standard normal CDF, ``0.5 erfc(-z / sqrt 2)``, branched as scipy's (cephes) ``ndtr``.

    With ``x = z / sqrt 2``: ``0.5 + 0.5 erf(x)`` when ``|x| < 1/sqrt 2``, else
    ``y = 0.5 erfc(|x|)`` and ``1 - y`` for ``x > 0``, so that the upper tail rounds to exactly 1
    where scipy's does (libm's ``erf``/``erfc`` still differ from cephes' in the last bit).
    """
    x = z * _SQRT1_2
    a = abs(x)
    if a < _SQRT1_2:
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(a)
    return 1.0 - y if x > 0.0 else y


@njit(cache=True, inline="always")
def _beats(merit, key, best, best_key, have_best):  # type: ignore[no-untyped-def]
    """Whether a feature of best merit ``merit`` and key ``key`` takes the place of the best
    so far: a higher merit, or an equal one and a smaller key (so the choice does not depend on
    the order of the columns)."""
    return merit > best or (have_best and merit == best and key < best_key)


@njit(cache=True)
def best_split(  # type: ignore[no-untyped-def]
    num_stats,
    num_range,
    nom_stats,
    shift,
    slot,
    n_classes,
    n_numeric,
    n_nominal,
    n_values,
    criterion,
    n_split_points,
    min_branch_fraction,
    allowed,
    keys,
    left_out,
    right_out,
):
    """The best binary split of the leaf owning ``slot`` (``LeafStats.best_split``) among the
    ``allowed`` features.

    Parameters
    ----------
    num_stats, num_range, nom_stats, shift
        The slot arrays (:mod:`streamtree.state`).
    slot, n_classes, n_numeric, n_nominal, n_values : int
        The slot and the logical sizes ``K``, ``F``, ``C``, ``V``.
    criterion : int
        ``INFO_GAIN``, ``GINI`` or ``HELLINGER``.
    n_split_points : int
        Numeric thresholds tried per feature.
    min_branch_fraction : float
        A candidate must send a fraction in ``(m, 1 - m)`` of the examples left.
    allowed : bool[:]
        ``allowed[f]`` for numeric column ``f``, ``allowed[F + c]`` for nominal column ``c``:
        the features that may be split on (all of them for a Hoeffding tree, a random subset
        per attempt for a random-subspace tree).
    keys : int64[:]
        A key per feature, in the order of ``allowed`` (the registry's
        :meth:`~streamtree.features.FeatureRegistry.feature_keys`): features of equal merit go
        to the smallest key, so the split does not depend on the order features arrived in.
    left_out, right_out : float64[:]
        Receive the chosen split's class counts on each side in ``[:n_classes]`` (zeros when
        none is found).

    Returns
    -------
    found : bool
    kind : int
        ``NUMERIC`` (0, ``x <= threshold`` goes left) or ``NOMINAL`` (1, ``code == threshold``
        goes left); -1 when not found.
    col : int
        Column within its kind; -1 when not found.
    threshold : float
        The numeric threshold or the nominal value code.
    merit : float
        -inf when not found.
    second_merit : float
        ``max(0, best merit among the other features)``.

    Notes
    -----
    Numeric column ``f`` is a candidate when it has examples and ``MAX > MIN``. Class ``k`` has
    ``mu_k = S_k / N_k + shift_f`` and ``sigma_k = sqrt(max((Q_k - S_k^2 / N_k) / (N_k - 1), 0))``
    (computed as ``(Q - S * (S / N)) / (N - 1)``; 0 mean below one example, 0 variance below
    two). The thresholds are ``t_j = MIN + (MAX - MIN) * (j / (P + 1))`` for ``j = 1..P`` and
    ``L_k(t) = N_k Phi((t - mu_k) / sigma_k)`` (a step ``N_k [t >= mu_k]`` when
    ``sigma_k = 0``), ``R_k = N_k - L_k``.

    Nominal column ``c`` (with examples) tries ``code == v`` for every value ``v < V`` seen at the
    leaf: ``L_k = nom[slot, c, v, k]``, ``R_k = T_k - L_k`` with ``T_k = sum_v nom[slot, c, v, k]``.

    A candidate whose left fraction ``sum L / sum T`` is not in ``(m, 1 - m)`` scores -inf. The
    best candidate of each feature (the first of equals) competes; of the features of the best
    merit, the one with the smallest key is chosen, and nothing is found unless its merit is
    finite.
    """
    k = n_classes
    held = np.empty(8 * k + merit_scratch(k))  # the only allocation,
    buf = borrow(held)  # handed to the helpers below without reference counting (kernels.borrow)
    tot = buf[0:k]
    cand = buf[k : 2 * k]
    fleft = buf[2 * k : 3 * k]
    mu = buf[3 * k : 4 * k]
    sd = buf[4 * k : 5 * k]
    work = buf[5 * k :]
    for i in range(k):
        left_out[i] = 0.0
        right_out[i] = 0.0
    inf = np.inf
    best = -inf
    second = 0.0
    best_kind = -1
    best_col = -1
    best_thr = 0.0
    best_key = 0
    have_best = False
    mbf = min_branch_fraction

    # numeric features
    denom = n_split_points + 1
    for f in range(n_numeric):
        lo = num_range[slot, f, MIN]
        hi = num_range[slot, f, MAX]
        if not (allowed[f] and hi > lo):
            continue
        seen = False
        for c in range(k):
            if num_stats[slot, f, c, N_] > 0.0:
                seen = True
        if not seen:
            continue
        for c in range(k):
            nk = num_stats[slot, f, c, N_]
            sk = num_stats[slot, f, c, S_]
            mean = sk / nk if nk > 0.0 else 0.0
            var = (num_stats[slot, f, c, Q_] - sk * mean) / (nk - 1.0) if nk > 1.0 else 0.0
            tot[c] = nk
            sd[c] = math.sqrt(max(var, 0.0))
            mu[c] = mean + shift[f]
        n = np_sum(tot, 0, k)
        term = total_part(criterion, tot, k, work)
        span = hi - lo
        f_best = -inf
        f_thr = 0.0
        for j in range(1, n_split_points + 1):
            t = lo + span * (j / denom)
            for c in range(k):
                s = sd[c]
                if tot[c] == 0.0:
                    cand[c] = 0.0  # = 0 * share, without the CDF
                elif s > 0.0:
                    cand[c] = tot[c] * _ndtr((t - mu[c]) / s)
                else:
                    cand[c] = tot[c] * (1.0 if t >= mu[c] else 0.0)
            n_left = np_sum(cand, 0, k)
            frac = n_left / n if n > 0.0 else 0.0
            if not (frac > mbf and 1.0 - frac > mbf):
                continue
            m = candidate_merit(criterion, cand, tot, k, n, n_left, term, work)
            if m > f_best:
                f_best = m
                f_thr = t
                for c in range(k):
                    fleft[c] = cand[c]
        if _beats(f_best, keys[f], best, best_key, have_best):
            if have_best and best > second:
                second = best
            best = f_best
            best_key = keys[f]
            have_best = True
            best_kind = NUMERIC
            best_col = f
            best_thr = f_thr
            for c in range(k):
                left_out[c] = fleft[c]
                right_out[c] = tot[c] - fleft[c]
        elif f_best > second:
            second = f_best

    # nominal features
    for col in range(n_nominal):
        if not allowed[n_numeric + col]:
            continue
        for c in range(k):
            tot[c] = 0.0
        for v in range(n_values):
            for c in range(k):
                tot[c] += nom_stats[slot, col, v, c]
        seen = False
        for c in range(k):
            if tot[c] > 0.0:
                seen = True
        if not seen:
            continue
        n = np_sum(tot, 0, k)
        term = total_part(criterion, tot, k, work)
        f_best = -inf
        f_val = 0
        for v in range(n_values):
            for c in range(k):
                cand[c] = nom_stats[slot, col, v, c]
            n_left = np_sum(cand, 0, k)
            if not n_left > 0.0:  # a value never seen at this leaf
                continue
            frac = n_left / n if n > 0.0 else 0.0
            if not (frac > mbf and 1.0 - frac > mbf):
                continue
            m = candidate_merit(criterion, cand, tot, k, n, n_left, term, work)
            if m > f_best:
                f_best = m
                f_val = v
        if _beats(f_best, keys[n_numeric + col], best, best_key, have_best):
            if have_best and best > second:
                second = best
            best = f_best
            best_key = keys[n_numeric + col]
            have_best = True
            best_kind = NOMINAL
            best_col = col
            best_thr = float(f_val)
            for c in range(k):
                left_out[c] = nom_stats[slot, col, f_val, c]
                right_out[c] = tot[c] - left_out[c]
        elif f_best > second:
            second = f_best

    hold(held)
    if not have_best:
        return False, -1, -1, 0.0, -inf, 0.0
    return True, best_kind, best_col, best_thr, best, second


@njit(cache=True)
def random_split(  # type: ignore[no-untyped-def]
    num_stats,
    num_range,
    nom_stats,
    shift,
    slot,
    n_classes,
    n_numeric,
    n_nominal,
    n_values,
    draws,
    u_threshold,
    left_out,
    right_out,
):
    """A random split of the leaf owning ``slot``, chosen without any criterion (the random
    decision trees of Fan et al., 2003, grown online).

    The feature is the one with the smallest of ``draws`` (one random ``uint64`` per feature,
    numeric columns then nominal ones) among those that can separate the leaf's examples (a
    numeric one seen with two values, a nominal one with two values). A
    numeric threshold is ``MIN + (MAX - MIN) * u_threshold`` of the values seen at the leaf, and
    the class counts on each side are estimated as in :func:`best_split`
    (``L_k = N_k Phi((t - mu_k) / sigma_k)``); a nominal split is ``code == v`` for the
    ``floor(u_threshold * m)``-th of the ``m`` values seen.

    Returns ``found, kind, col, threshold`` and writes the side counts to ``left_out`` and
    ``right_out`` (``[:n_classes]``); nothing is found when no feature can separate the examples.
    """
    k = n_classes
    for i in range(k):
        left_out[i] = 0.0
        right_out[i] = 0.0
    chosen = -1
    for f in range(n_numeric + n_nominal):
        if (chosen < 0 or draws[f] < draws[chosen]) and splittable(
            num_stats, num_range, nom_stats, slot, k, n_numeric, n_values, f
        ):
            chosen = f
    if chosen < 0:
        return False, -1, -1, 0.0
    if chosen < n_numeric:
        f = chosen
        lo = num_range[slot, f, MIN]
        hi = num_range[slot, f, MAX]
        t = lo + (hi - lo) * u_threshold
        for c in range(k):
            nk = num_stats[slot, f, c, N_]
            sk = num_stats[slot, f, c, S_]
            mean = sk / nk if nk > 0.0 else 0.0
            var = (num_stats[slot, f, c, Q_] - sk * mean) / (nk - 1.0) if nk > 1.0 else 0.0
            sd = math.sqrt(max(var, 0.0))
            mu = mean + shift[f]
            if nk == 0.0:
                left = 0.0
            elif sd > 0.0:
                left = nk * _ndtr((t - mu) / sd)
            else:
                left = nk * (1.0 if t >= mu else 0.0)
            left_out[c] = left
            right_out[c] = nk - left
        return True, NUMERIC, f, t
    col = chosen - n_numeric
    m = 0
    for v in range(n_values):
        m += value_seen(nom_stats, slot, col, v, k)
    pick = min(int(u_threshold * m), m - 1)
    value = 0
    for v in range(n_values):
        if value_seen(nom_stats, slot, col, v, k):
            if pick == 0:
                value = v
                break
            pick -= 1
    for v in range(n_values):
        for c in range(k):
            if v == value:
                left_out[c] += nom_stats[slot, col, v, c]
            else:
                right_out[c] += nom_stats[slot, col, v, c]
    return True, NOMINAL, col, float(value)
