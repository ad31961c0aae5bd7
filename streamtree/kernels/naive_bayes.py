"""The tempered naive-Bayes factor as compiled kernels over the tree's ``nb_*`` arrays.

A tree's leaf knows only which region an example fell in; inside the region every feature
still carries information. The factor adds it (the reference implementation is
``tests/reference/naive_bayes.py``):

.. math::

    p(y \\mid x) \\;\\propto\\; p_{\\text{tree}}(y \\mid \\text{leaf}(x))
    \\prod_f p(x_f \\mid y)^{\\gamma},

a Gaussian per numeric column and class (variance shrunk towards the column's pooled variance
with ``NU`` pseudo-examples), add-one value frequencies per nominal column and class, and
``gamma`` in ``[0, 1]`` fitted by Newton steps on the log loss of examples scored before they
were learned. The operations are those of the class, in the same order (sums over classes and
over the scored examples use numpy's pairwise summation, as ``ndarray.sum`` does), so the
kernels agree with it to the last bit on a platform where numpy's and the C library's
``exp``/``log`` agree.

Arrays (:mod:`streamtree.state`; capacities ``Fc`` numeric columns, ``Cc`` nominal columns,
``Vc`` value codes, ``Kc`` classes):

- statistics, the leaf-statistics layout with one slot: ``nb_num[0, f, k, N_ | S_ | Q_]``
  (count, sum, sum of squares of ``x - shift[f]``), ``nb_nom[0, c, v, k]`` (counts);
- parameters as of the last :func:`nb_refresh`: ``nb_mean``, ``nb_inv2var``, ``nb_const``
  ``(Fc, Kc)`` (mean of the shifted values, ``1 / (2 var)``, ``-log(2 pi var) / 2``; all 0
  where a column is unusable) and ``nb_table`` ``(Cc, Vc + 1, Kc)`` (log value probabilities;
  row ``n_values`` and every row after it: a value unseen at the refresh; NaN everywhere for a
  column without statistics);
- scored examples: ``nb_a``, ``nb_b`` ``(BUFFER, Kc)`` (the tree's log probabilities, the
  factor's log likelihoods minus their maximum; created filled with ``log(1e-15)`` and 0) and
  ``nb_y`` ``(BUFFER,)``.

The caller keeps the numbers of classes and value codes the parameters were refreshed with
(``nb_classes``, ``n_values`` of :func:`nb_loglik`) and the count of scored examples.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.reductions import np_max, np_maximum, np_sum, py_max
from streamtree.state import BUFFER, MIN_PROBA, N_, Q_, S_

__all__ = [
    "BUFFER",
    "MIN_SAMPLES",
    "NEWTON_STEPS",
    "NU",
    "SAMPLE_EVERY",
    "nb_fit",
    "nb_loglik",
    "nb_loglik_rows",
    "nb_refresh",
    "nb_score",
    "nb_temper",
]

# the same values as the reference implementation (the tests check they agree)
NU = 2.0  # pseudo-examples of the pooled variance in each class's variance
SAMPLE_EVERY = 8  # score every this many-th example before learning it
MIN_SAMPLES = 64  # gamma stays as it is until this many examples were scored
NEWTON_STEPS = 5
LOG_2PI = math.log(2.0 * math.pi)
LOG_FLOOR = math.log(1e-15)  # nb_a's fill: a class unknown when a row was scored


# -- the feature models ---------------------------------------------------------------------
@njit(cache=True)
def nb_refresh(
    nb_num: np.ndarray,
    nb_nom: np.ndarray,
    n_classes: int,
    n_numeric: int,
    n_nominal: int,
    n_values: int,
    nb_mean: np.ndarray,
    nb_inv2var: np.ndarray,
    nb_const: np.ndarray,
    nb_table: np.ndarray,
) -> None:
    """Recompute the feature models' parameters from the statistics
    (``NaiveBayesFactor.refresh``).

    Numeric column ``f``, class ``k``, with ``n_k, s_k, q_k`` the count, sum and sum of
    squares of ``x - shift[f]`` and ``N, S, Q`` their sums over the classes:

    .. math::

        \\bar\\sigma^2 = \\frac{Q - S^2 / \\max(N, 1)}{N - 1} \\;(0 \\text{ if } N \\le 1), \\quad
        \\mu_k = \\frac{s_k}{n_k}, \\quad
        \\sigma_k^2 = \\frac{\\max(q_k - s_k \\mu_k, 0) + \\nu \\bar\\sigma^2}
                          {\\max(n_k - 1 + \\nu, 10^{-12})}

    (``nu = NU``); where every class has a value, ``pooled > 0`` and ``sigma_k^2 > 0`` the
    parameters are ``mean = mu_k``, ``inv2var = 1 / (2 sigma_k^2)`` and
    ``const = -(log(2 pi) + log sigma_k^2) / 2``, elsewhere all three are 0 (the column's term
    is then exactly 0). Nominal column ``c`` with counts ``n_{vk}``:

    .. math::

        \\text{table}[c, v, k] = \\log \\frac{n_{vk} + 1}{\\sum_{v'} n_{v'k} + |\\{v : n_v > 0\\}| + 1},
        \\qquad
        \\text{table}[c, v \\ge V, k] = \\log \\frac{1}{\\sum_{v'} n_{v'k} + |\\{v : n_v > 0\\}| + 1},

    NaN for a column without counts. Every entry outside ``[:n_numeric, :n_classes]`` (numeric)
    and ``[:n_nominal, :, :n_classes]`` (nominal) is cleared (0, NaN), so parameters of columns
    or classes the refresh did not know never contribute.

    Parameters
    ----------
    nb_num, nb_nom
        The statistics (slot 0 is read).
    n_classes, n_numeric, n_nominal, n_values
        Logical sizes of the statistics.
    nb_mean, nb_inv2var, nb_const, nb_table
        Written in place (the parameters are of shifted values: :func:`nb_loglik` subtracts
        the shift).
    """
    if (
        n_numeric > nb_num.shape[1]
        or n_numeric > nb_mean.shape[0]
        or n_nominal > nb_nom.shape[1]
        or n_nominal > nb_table.shape[0]
        or n_values > nb_nom.shape[2]
        or n_values + 1 > nb_table.shape[1]
        or (n_numeric > 0 and (n_classes > nb_num.shape[2] or n_classes > nb_mean.shape[1]))
        or (n_nominal > 0 and (n_classes > nb_nom.shape[3] or n_classes > nb_table.shape[2]))
    ):
        raise ValueError("nb_refresh: logical sizes exceed the arrays' capacities")
    k_cap = nb_mean.shape[1]
    n = np.empty(max(n_classes, 1))
    s = np.empty(max(n_classes, 1))
    q = np.empty(max(n_classes, 1))
    for f in range(nb_mean.shape[0]):
        if f >= n_numeric:
            for j in range(k_cap):
                nb_mean[f, j] = 0.0
                nb_inv2var[f, j] = 0.0
                nb_const[f, j] = 0.0
            continue
        all_seen = True
        for j in range(n_classes):
            n[j] = nb_num[0, f, j, N_]
            s[j] = nb_num[0, f, j, S_]
            q[j] = nb_num[0, f, j, Q_]
            if not n[j] > 0.0:
                all_seen = False
        total_n = np_sum(n, 0, n_classes)
        total_s = np_sum(s, 0, n_classes)
        total_q = np_sum(q, 0, n_classes)
        pooled = 0.0
        if total_n > 1.0:
            pooled = (total_q - total_s * total_s / np_maximum(total_n, 1.0)) / (total_n - 1.0)
        for j in range(k_cap):
            nb_mean[f, j] = 0.0
            nb_inv2var[f, j] = 0.0
            nb_const[f, j] = 0.0
            if j >= n_classes:
                continue
            mean = s[j] / n[j] if n[j] > 0.0 else 0.0
            spread = np_maximum(q[j] - s[j] * mean, 0.0)  # (n - 1) * the class's variance
            var = (spread + NU * pooled) / np_maximum(n[j] - 1.0 + NU, 1e-12)
            if all_seen and pooled > 0.0 and var > 0.0:
                nb_mean[f, j] = mean
                nb_inv2var[f, j] = 0.5 / var
                nb_const[f, j] = -0.5 * (LOG_2PI + math.log(var))
    for c in range(nb_table.shape[0]):
        for v in range(nb_table.shape[1]):
            for j in range(nb_table.shape[2]):
                nb_table[c, v, j] = np.nan
        if c >= n_nominal:
            continue
        seen_values = 0
        grand = 0.0
        for v in range(n_values):
            value_total = 0.0
            for j in range(n_classes):
                value_total += nb_nom[0, c, v, j]
            if value_total > 0.0:
                seen_values += 1
            grand += value_total
        if not grand > 0.0:
            continue  # no statistics: NaN
        for j in range(n_classes):
            per_class = 0.0
            for v in range(n_values):
                per_class += nb_nom[0, c, v, j]
            denominator = per_class + seen_values + 1.0
            for v in range(n_values):
                nb_table[c, v, j] = math.log((nb_nom[0, c, v, j] + 1.0) / denominator)
            unseen = math.log(1.0 / denominator)
            for v in range(n_values, nb_table.shape[1]):
                nb_table[c, v, j] = unseen


@njit(cache=True)
def nb_loglik(
    nb_mean: np.ndarray,
    nb_inv2var: np.ndarray,
    nb_const: np.ndarray,
    nb_table: np.ndarray,
    shift: np.ndarray,
    nb_classes: int,
    n_numeric: int,
    n_nominal: int,
    n_values: int,
    num_row: np.ndarray,
    nom_row: np.ndarray,
    n_classes: int,
    out: np.ndarray,
) -> None:
    """Log likelihood of one example under each class (``NaiveBayesFactor.row_loglik``).

    .. math::

        \\ell_k = \\sum_{f \\,\\text{usable},\\; x_f \\text{ present}}
            \\left(\\text{const}_{fk} - (x_f - \\text{shift}_f - \\text{mean}_{fk})^2\\,
            \\text{inv2var}_{fk}\\right)
          + \\sum_{c \\,\\text{known},\\; v_c \\ge 0} \\text{table}[c, \\min(v_c, V), k]

    for the ``nb_classes`` classes of the last refresh, numeric columns first, in column order
    (a numeric column is usable when some class has ``inv2var != 0``: a column with all-zero
    parameters contributes exactly 0; a nominal column is known when its table is not NaN).
    A numeric column whose term is not finite for some class (a value so far from the means
    that its square overflows) contributes 0 to every class: its ``-inf`` for every class
    would make the tempered probabilities ``-inf - -inf``, NaN.
    A class ``k >= nb_classes`` (newer than the refresh) gets ``max_j ell_j`` (0 if
    ``nb_classes == 0``): no evidence against it.

    Parameters
    ----------
    nb_mean, nb_inv2var, nb_const, nb_table
        Parameters from :func:`nb_refresh`.
    shift
        The tree's shift per numeric column.
    nb_classes
        Classes the parameters know (``n_classes`` at the last refresh).
    n_numeric, n_nominal
        Columns to read (columns beyond the last refresh's have cleared parameters and add
        nothing; columns beyond ``num_row``'s or ``nom_row``'s length count as missing).
    n_values
        Value codes known at the last refresh: codes ``>= n_values`` read the unseen-value row.
    num_row
        Numeric values by column, NaN missing.
    nom_row
        Nominal value codes by column, -1 missing.
    n_classes
        Classes now; ``out[:n_classes]`` is written.
    out
        Output, at least ``n_classes`` long.
    """
    if (
        nb_classes > n_classes
        or n_classes > out.shape[0]
        or n_values + 1 > nb_table.shape[1]
        or n_numeric > nb_mean.shape[0]
        or n_numeric > shift.shape[0]
        or n_nominal > nb_table.shape[0]
        or (n_numeric > 0 and nb_classes > nb_mean.shape[1])
        or (n_nominal > 0 and nb_classes > nb_table.shape[2])
    ):
        raise ValueError("nb_loglik: sizes exceed the arrays' capacities")
    k = nb_classes
    for j in range(k):
        out[j] = 0.0
    term = np.empty(k)  # a column's terms, added once all are finite
    for col in range(min(n_numeric, num_row.shape[0])):
        usable = False
        for j in range(k):
            if nb_inv2var[col, j] != 0.0:
                usable = True
                break
        if not usable:
            continue
        value = num_row[col]
        if value != value:
            continue
        x = value - shift[col]
        finite = True
        for j in range(k):
            d = x - nb_mean[col, j]
            term[j] = nb_const[col, j] - d * d * nb_inv2var[col, j]
            finite = finite and -math.inf < term[j] < math.inf
        if finite:
            for j in range(k):
                out[j] += term[j]
    if k > 0:
        for col in range(min(n_nominal, nom_row.shape[0])):
            if nb_table[col, n_values, 0] != nb_table[col, n_values, 0]:
                continue  # no statistics at the refresh
            code = nom_row[col]
            if code < 0:
                continue
            row = code if code < n_values else n_values
            for j in range(k):
                out[j] += nb_table[col, row, j]
    top = py_max(out, k, 0.0)
    for j in range(k, n_classes):
        out[j] = top


@njit(cache=True)
def nb_loglik_rows(
    nb_mean: np.ndarray,
    nb_inv2var: np.ndarray,
    nb_const: np.ndarray,
    nb_table: np.ndarray,
    shift: np.ndarray,
    nb_classes: int,
    n_numeric: int,
    n_nominal: int,
    n_values: int,
    num: np.ndarray,
    nom: np.ndarray,
    n_classes: int,
    out: np.ndarray,
) -> None:
    """:func:`nb_loglik` of every row: ``out[i, :n_classes]`` for ``num[i]`` (float64, NaN
    missing) and ``nom[i]`` (int64, -1 missing); the batch ``NaiveBayesFactor.loglik`` up to
    rounding, and :func:`nb_loglik` row by row exactly.

    .. math::

        \\text{out}[i, k] = \\ell_k(\\text{num}_i, \\text{nom}_i)
    """
    if num.shape[0] != nom.shape[0] or out.shape[0] < num.shape[0]:
        raise ValueError("nb_loglik_rows: num, nom and out need the same rows")
    for i in range(num.shape[0]):
        nb_loglik(
            nb_mean,
            nb_inv2var,
            nb_const,
            nb_table,
            shift,
            nb_classes,
            n_numeric,
            n_nominal,
            n_values,
            num[i],
            nom[i],
            n_classes,
            out[i],
        )


@njit(cache=True)
def nb_temper(proba: np.ndarray, loglik: np.ndarray, gamma: float, n_classes: int, out: np.ndarray) -> None:
    """Temper one example's probabilities by the factor (``NaiveBayesFactor.temper``):

    .. math::

        z_k = \\log p_k + \\gamma (\\ell_k - \\max_j \\ell_j), \\qquad
        q_k = \\frac{e^{z_k - \\max_j z_j}}{\\sum_i e^{z_i - \\max_j z_j}}, \\qquad
        \\text{out}_k = \\frac{\\max(q_k, 10^{-15})}{\\sum_i \\max(q_i, 10^{-15})}

    over ``k < n_classes`` (the floor is the model's ``MIN_PROBA``: every served probability
    is positive, where ``e^{z_k - max z}`` underflows to 0 too; when no ``q_k`` is below it,
    ``out = q``); ``gamma == 0`` (or no classes) copies ``proba``. ``out`` may be ``proba``
    itself.
    """
    if n_classes > proba.shape[0] or n_classes > loglik.shape[0] or n_classes > out.shape[0]:
        raise ValueError("nb_temper: n_classes exceeds the arrays")
    if gamma == 0.0 or n_classes == 0:
        for j in range(n_classes):
            out[j] = proba[j]
        return
    top = py_max(loglik, n_classes, 0.0)
    z = np.empty(n_classes)
    for j in range(n_classes):
        z[j] = math.log(proba[j]) + gamma * (loglik[j] - top)
    peak = py_max(z, n_classes, 0.0)
    total = 0.0
    for j in range(n_classes):
        z[j] = math.exp(z[j] - peak)
        total += z[j]
    floored = False
    for j in range(n_classes):
        out[j] = z[j] / total
        if out[j] < MIN_PROBA:
            out[j] = MIN_PROBA
            floored = True
    if floored:  # renormalised only then: the common case keeps its bits
        total = 0.0
        for j in range(n_classes):
            total += out[j]
        for j in range(n_classes):
            out[j] /= total


# -- fitting gamma --------------------------------------------------------------------------
@njit(cache=True)
def nb_score(
    nb_a: np.ndarray,
    nb_b: np.ndarray,
    nb_y: np.ndarray,
    n_scored: int,
    proba: np.ndarray,
    loglik: np.ndarray,
    n_classes: int,
    k: int,
) -> None:
    """Keep one example scored before it is learned (``NaiveBayesFactor.score``), at row
    ``i = n_scored % BUFFER``, columns ``[:n_classes]``:

    .. math::

        a_{ik} = \\log \\max(p_k, 10^{-15}), \\qquad
        b_{ik} = \\ell_k - \\max_j \\ell_j, \\qquad y_i = k.

    The caller increments ``n_scored``. Columns past ``n_classes`` keep what the arrays were
    created with (``log(1e-15)`` and 0: a class unknown at scoring time had probability
    ``1e-15``).
    """
    if nb_a.shape[0] < BUFFER or nb_b.shape[0] < BUFFER or nb_y.shape[0] < BUFFER:
        raise ValueError("nb_score: the buffers need BUFFER rows")
    if (
        n_classes > nb_a.shape[1]
        or n_classes > nb_b.shape[1]
        or n_classes > proba.shape[0]
        or n_classes > loglik.shape[0]
    ):
        raise ValueError("nb_score: n_classes exceeds the arrays")
    i = n_scored % BUFFER
    top = py_max(loglik, n_classes, 0.0)
    for j in range(n_classes):
        nb_a[i, j] = math.log(np_maximum(proba[j], 1e-15))
        nb_b[i, j] = loglik[j] - top
    nb_y[i] = k


@njit(cache=True)
def nb_fit(nb_a: np.ndarray, nb_b: np.ndarray, nb_y: np.ndarray, n_scored: int, n_classes: int, gamma: float) -> float:
    """Newton steps on the scored examples' log loss over ``gamma`` in ``[0, 1]``
    (``NaiveBayesFactor.fit``); returns the new ``gamma`` (the old one below ``MIN_SAMPLES``
    scored examples).

    Over the ``m = min(n_scored, BUFFER)`` kept rows and ``k < n_classes``:

    .. math::

        q_{ik} = \\operatorname{softmax}_k(a_{ik} + \\gamma b_{ik}), \\quad
        L' = \\sum_i \\mathbb{E}_{q_i}[b_i] - b_{iy_i}, \\quad
        L'' = \\sum_i \\mathbb{E}_{q_i}[b_i^2] - \\mathbb{E}_{q_i}[b_i]^2,

    ``gamma <- min(max(gamma - L'/L'', 0), 1)``, at most ``NEWTON_STEPS`` times, stopping when
    ``L'' <= 1e-12`` or ``gamma`` no longer moves.
    """
    m = min(n_scored, BUFFER)
    if m < MIN_SAMPLES:
        return gamma
    if (
        m > nb_a.shape[0]
        or m > nb_b.shape[0]
        or m > nb_y.shape[0]
        or n_classes > nb_a.shape[1]
        or n_classes > nb_b.shape[1]
    ):
        raise ValueError("nb_fit: sizes exceed the arrays")
    kk = n_classes
    z = np.empty(max(kk, 1))
    t = np.empty(max(kk, 1))
    grads = np.empty(m)
    hessians = np.empty(m)
    for _ in range(NEWTON_STEPS):
        for i in range(m):
            for j in range(kk):
                z[j] = nb_a[i, j] + gamma * nb_b[i, j]
            top = np_max(z, kk)
            for j in range(kk):
                z[j] = math.exp(z[j] - top)
            norm = np_sum(z, 0, kk)
            for j in range(kk):
                z[j] = z[j] / norm  # q
                t[j] = z[j] * nb_b[i, j]
            mean_b = np_sum(t, 0, kk)
            grads[i] = mean_b - nb_b[i, nb_y[i]]
            for j in range(kk):
                t[j] = z[j] * nb_b[i, j] * nb_b[i, j]
            hessians[i] = np_sum(t, 0, kk) - mean_b * mean_b
        grad = np_sum(grads, 0, m)
        hess = np_sum(hessians, 0, m)
        if hess <= 1e-12:
            break
        step = gamma - grad / hess
        if 0.0 > step:  # Python's min(max(step, 0.0), 1.0)
            step = 0.0
        if 1.0 < step:
            step = 1.0
        if step == gamma:
            break
        gamma = step
    return gamma
