"""Split kernels: a leaf's split statistics, the split criteria, the best split, the Hoeffding test.

Pure functions of the slot arrays of :mod:`streamtree.state` (``num_stats``, ``num_range``,
``nom_stats``, ``slot_seen``, ``shift``). They compute exactly what
the reference ``LeafStats`` (``tests/reference/observers.py``) and the reference ``tests/reference/criteria.py`` compute with numpy:

- the statistics are added with the same arithmetic in the same order, so they are bit-identical;
- every sum over classes is taken in numpy's order (its pairwise summation, :func:`~streamtree.kernels.reductions.pairwise`),
  so the merits are bit-identical to the numpy reference's given the same class counts; only the
  normal CDF (libm ``erf``/``erfc`` here, cephes in scipy's ``ndtr``) may differ in the last
  bit, which moves a numeric candidate's merit by about ``1e-16``.

Criteria are passed as integer codes (:data:`CRITERION_CODES`). Nothing here allocates in a loop:
:func:`best_split` takes one scratch array per call (only a sum of more than 128 terms, which
Hellinger with 12 or more classes needs, allocates the small stack of its pairwise summation).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.borrow import borrow, hold
from streamtree.kernels.reductions import np_sum
from streamtree.state import MAX, MIN, N_, NOMINAL, NUMERIC, Q_, S_, SEEN

__all__ = [
    "CRITERION_CODES",
    "GINI",
    "HELLINGER",
    "INFO_GAIN",
    "best_split",
    "classes_seen",
    "criterion_range",
    "hoeffding_bound",
    "merit",
    "random_split",
    "split_decision",
    "splittable",
    "update_stats",
]

INFO_GAIN, GINI, HELLINGER = 0, 1, 2
CRITERION_CODES = {"info_gain": INFO_GAIN, "gini": GINI, "hellinger": HELLINGER}

_SQRT1_2 = math.sqrt(0.5)  # M_SQRT1_2
_SQRT2 = math.sqrt(2.0)
_TINY = 1e-300  # x log2 x is taken at max(x, _TINY): 0 log 0 = 0


# -- statistics ---------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def update_stats(num_stats, num_range, nom_stats, slot_seen, shift, slot, k, num_row, nom_row):  # type: ignore[no-untyped-def]
    """Add one example of class ``k`` to the statistics of ``slot``.

    Parameters
    ----------
    num_stats : float64[S, F, K, 3]
    num_range : float64[S, F, 2]
    nom_stats : float64[S, C, V, K]
    slot_seen : float64[S, 2]
    shift : float64[F]
    slot, k : int
        The slot and the example's class code.
    num_row : float64[:]
        Numeric values of columns ``0 .. len(num_row) - 1``; NaN is missing.
    nom_row : int64[:]
        Nominal value codes of columns ``0 .. len(nom_row) - 1``; negative is missing.

    Notes
    -----
    For every present numeric value ``x_f``, with ``v = x_f - shift[f]``::

        N[slot, f, k] += 1;  S[slot, f, k] += v;  Q[slot, f, k] += v * v
        MIN[slot, f] = min(MIN[slot, f], x_f);  MAX[slot, f] = max(MAX[slot, f], x_f)

    for every present nominal code ``v_c``: ``nom_stats[slot, c, v_c, k] += 1``; and
    ``slot_seen[slot, SEEN] += 1``. This is ``LeafStats._add`` for one row, so adding rows one by
    one in example order gives bit-identical sums (a tie in ``min``/``max`` takes the new value,
    as numpy's ``minimum.at`` does: it only shows in the sign of a zero). The arrays must already
    be large enough for ``slot``, ``k``, the columns and the codes (no bounds checks).
    """
    for f in range(num_row.shape[0]):
        raw = num_row[f]
        if math.isnan(raw):
            continue
        v = raw - shift[f]
        num_stats[slot, f, k, N_] += 1.0
        num_stats[slot, f, k, S_] += v
        num_stats[slot, f, k, Q_] += v * v
        if not num_range[slot, f, MIN] < raw:
            num_range[slot, f, MIN] = raw
        if not num_range[slot, f, MAX] > raw:
            num_range[slot, f, MAX] = raw
    for c in range(nom_row.shape[0]):
        code = nom_row[c]
        if code >= 0:
            nom_stats[slot, c, code, k] += 1.0
    slot_seen[slot, SEEN] += 1.0


# -- helpers ------------------------------------------------------------------------------------
@njit(cache=True)
def _xlogx(x):  # type: ignore[no-untyped-def]
    return x * math.log2(max(x, _TINY))


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
def _total_term(criterion, total, k, buf):  # type: ignore[no-untyped-def]
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
def _merit(criterion, left, total, k, n, n_left, total_term, buf):  # type: ignore[no-untyped-def]
    """Merit of one candidate given ``n = sum total``, ``n_left = sum left`` and
    ``total_term = _total_term(...)``; ``buf`` is scratch of at least ``k * k + 2 * k``.

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
def _scratch_size(k):  # type: ignore[no-untyped-def]
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
    buf = np.empty(_scratch_size(n_classes))
    n = np_sum(total, 0, n_classes)
    n_left = np_sum(left, 0, n_classes)
    term = _total_term(criterion, total, n_classes, buf)
    return _merit(criterion, left, total, n_classes, n, n_left, term, buf)


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


# -- split search -------------------------------------------------------------------------------
@njit(cache=True)
def best_split(  # type: ignore[no-untyped-def]
    num_stats, num_range, nom_stats, shift, slot, n_classes, n_numeric, n_nominal, n_values,
    criterion, n_split_points, min_branch_fraction, allowed, left_out, right_out,
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
    best candidate of each feature (the first of equals) competes in the order numeric columns,
    nominal columns; the first best is chosen (numpy ``argmax``), and nothing is found unless its
    merit is finite.
    """
    k = n_classes
    held = np.empty(8 * k + _scratch_size(k))  # the only allocation,
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
        term = _total_term(criterion, tot, k, work)
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
            m = _merit(criterion, cand, tot, k, n, n_left, term, work)
            if m > f_best:
                f_best = m
                f_thr = t
                for c in range(k):
                    fleft[c] = cand[c]
        if f_best > best:
            if have_best and best > second:
                second = best
            best = f_best
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
        term = _total_term(criterion, tot, k, work)
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
            m = _merit(criterion, cand, tot, k, n, n_left, term, work)
            if m > f_best:
                f_best = m
                f_val = v
        if f_best > best:
            if have_best and best > second:
                second = best
            best = f_best
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
def splittable(num_stats, num_range, nom_stats, slot, k, n_numeric, n_nominal, n_values, f) -> bool:  # type: ignore[no-untyped-def]
    """Whether feature ``f`` (numeric ``f < F``, else nominal ``f - F``) can separate the
    leaf's examples: a numeric one seen with two values, a nominal one with two values seen."""
    if f < n_numeric:
        if not num_range[slot, f, MAX] > num_range[slot, f, MIN]:
            return False
        for c in range(k):
            if num_stats[slot, f, c, N_] > 0.0:
                return True
        return False
    col = f - n_numeric
    n_seen = 0
    for v in range(n_values):
        n_seen += _value_seen(nom_stats, slot, col, v, k)
    return n_seen >= 2


@njit(cache=True)
def classes_seen(num_stats, nom_stats, slot, k, n_numeric, n_nominal, n_values) -> int:  # type: ignore[no-untyped-def]
    """How many of the ``k`` classes the split statistics of ``slot`` hold examples of (with a
    value of some feature), counting no further than 2.

    Below 2 no candidate can separate classes: every merit :func:`best_split` would compute is
    0 up to rounding (information gain ``sum T log T``-terms that cancel, Gini ``G = 0``,
    Hellinger without a pair), which the learning loop already refuses (``MERIT_NOISE``).
    Checking first skips that search: on Agrawal most leaves are pure, and the search on them
    was most of the splitting's cost."""
    n = 0
    for c in range(k):
        seen = False
        for f in range(n_numeric):
            if num_stats[slot, f, c, N_] > 0.0:
                seen = True
                break
        if not seen:
            for col in range(n_nominal):
                for v in range(n_values):
                    if nom_stats[slot, col, v, c] > 0.0:
                        seen = True
                        break
                if seen:
                    break
        if seen:
            n += 1
            if n == 2:
                return n
    return n


@njit(cache=True)
def _value_seen(nom_stats, slot, col, v, k) -> bool:  # type: ignore[no-untyped-def]
    """Whether the leaf owning ``slot`` saw value ``v`` of nominal column ``col``."""
    for c in range(k):
        if nom_stats[slot, col, v, c] > 0.0:
            return True
    return False


@njit(cache=True)
def random_split(  # type: ignore[no-untyped-def]
    num_stats, num_range, nom_stats, shift, slot, n_classes, n_numeric, n_nominal, n_values,
    draws, u_threshold, left_out, right_out,
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
                num_stats, num_range, nom_stats, slot, k, n_numeric, n_nominal, n_values, f):
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
        m += _value_seen(nom_stats, slot, col, v, k)
    pick = min(int(u_threshold * m), m - 1)
    value = 0
    for v in range(n_values):
        if _value_seen(nom_stats, slot, col, v, k):
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
