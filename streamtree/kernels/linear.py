"""The linear component: an online softmax regression on the numeric features, pooled with the
tree's smoothed probabilities by weights fitted online on a prequential window.

A tree's leaves are constant distributions: where the posterior is smooth in the features
(a linear or gently curved concept inside a leaf), they step through it. One multinomial
logistic regression on the standardised numeric features, learned from every example the
tree learns, sees what the partition cannot; the served probability is their log-linear pool

.. math::

    p_k \\propto \\exp\\big(a \\log p^{tree}_k + (b + c\\,u) \\log p^{lr}_k\\big), \\qquad
    u = 1 - \\max_j p^{tree}_j, \\quad a \\in [0, 1],\\; b, c \\ge 0,

where ``u``, the tree's own uncertainty at the leaf, lets the regression weigh more where the
leaf is mixed (near a boundary the partition has not resolved) than where it is pure. The
weights are fitted every ``MIX_EVERY`` examples (every ``MIX_EVERY_SETTLED`` once
``MIX_SETTLE`` have been scored: :func:`refit_due`) by a projected Newton step on the log loss of
the last ``WINDOW`` examples *as they were predicted before being learned* (a prequential
objective: it sees time, which the leave-one-out objective of the counts cannot), penalised
toward ``(1, 0, 0)``, the tree alone, by ``PRIOR / 2 ((a - 1)^2 + b^2 + c^2)``. The penalty
keeps the pool at the tree's until the window shows the regression helps; ``a < 1`` lets a
tree that is confidently stepped be softened where the regression carries the signal. A
detected change sets ``(a, b, c) = (1, 0, 0)`` and empties the window (the regression fitted
the old concept). What the uncertainty term and the schedule gained:
``docs/decisions/linear-component.md``.

Arrays (per tree; :mod:`streamtree.state`):

- ``lr_scale[f] = (n, mean, m2, G)``: Welford's running count, mean and sum of squared
  deviations of numeric column ``f`` (missing values skipped, and so is a value whose update
  would overflow them: the scale stays finite, so a standardised value is never NaN), and the AdaGrad accumulator
  its weights share;
- ``lr_w[k, f]``: the weight of column ``f`` for class ``k``; ``lr_bias[k] = (w, G)`` the
  intercept of class ``k`` and its own accumulator;
- ``mix_a[i, k] = log p^{tree}_k``, ``mix_b[i, k] = log p^{lr}_k``, ``mix_y[i]`` and
  ``mix_u[i] = u`` of the window's row ``i = n_scored % WINDOW`` (floored at ``1e-15``; columns of classes unknown
  when the row was scored keep ``log 1e-15``).

Every kernel is a pure function of its arguments; ``tests/reference/linear.py`` is the slow
twin each one is tested against, operation for operation.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.state import WINDOW

__all__ = [
    "CLIP",
    "ETA",
    "L2",
    "MIX_EVERY",
    "MIX_EVERY_SETTLED",
    "MIX_SETTLE",
    "PRIOR",
    "WINDOW",
    "lr_learn",
    "lr_proba",
    "lr_proba_row",
    "mix_fit",
    "mix_pool",
    "mix_score",
    "refit_due",
    "standardise",
    "uncertainty",
]

MIX_EVERY = 100  # the pool is refitted every this many scored examples while it settles,
MIX_SETTLE = 2 * WINDOW  # for this many scored examples (since the start or a detected change),
MIX_EVERY_SETTLED = 500  # then every this many (each window row still in two refits)
NEWTON_STEPS = 1  # warm-started: more steps gained nothing (docs/decisions/regression-step.md)
PRIOR = 5.0  # strength of the pull toward (a, b) = (1, 0), in examples
RIDGE = 1e-3  # per example: keeps the 2x2 Newton system well posed
ETA = 0.1  # AdaGrad's step
L2 = 1e-4  # weight decay of the regression's weights (not the intercepts)
CLIP = 5.0  # standardised values are clipped to [-CLIP, CLIP]
LOG_FLOOR = math.log(1e-15)


@njit(cache=True)
def _standard(scale, x, f) -> float:  # type: ignore[no-untyped-def]
    """``clip((x - mean_f) / sd_f, -CLIP, CLIP)`` with ``sd_f = sqrt(m2_f / (n_f - 1))``; 0 for a
    missing value, a column seen fewer than twice or one that never varied."""
    n = scale[f, 0]
    if x != x or n <= 1.0 or scale[f, 2] <= 0.0:
        return 0.0
    v = (x - scale[f, 1]) / math.sqrt(scale[f, 2] / (n - 1.0))
    if v > CLIP:
        return CLIP
    if v < -CLIP:
        return -CLIP
    return v


@njit(cache=True)
def standardise(scale, num_row, n_numeric, z) -> None:  # type: ignore[no-untyped-def]
    """``z[f]``, the standardised value of ``num_row[f]`` (:func:`_standard`), for
    ``f < n_numeric``."""
    for f in range(n_numeric):
        z[f] = _standard(scale, num_row[f], f)


@njit(cache=True)
def lr_proba_row(w, bias, scale, num_row, n_numeric, n_classes, out) -> None:  # type: ignore[no-untyped-def]
    """:func:`lr_proba` of a raw row, standardising each value as it goes (no working array:
    this is the prediction path, row after row). The same sums in the same order, so the same
    bits as :func:`standardise` then :func:`lr_proba`."""
    for k in range(n_classes):
        out[k] = bias[k, 0]
    for f in range(n_numeric):
        v = _standard(scale, num_row[f], f)
        for k in range(n_classes):
            out[k] += w[k, f] * v
    _softmax(out, n_classes)


@njit(cache=True)
def _softmax(out, n) -> None:  # type: ignore[no-untyped-def]
    """``out[:n] = softmax(out[:n])``, shifted by the largest score."""
    top = -math.inf
    for k in range(n):
        if out[k] > top:
            top = out[k]
    total = 0.0
    for k in range(n):
        out[k] = math.exp(out[k] - top)
        total += out[k]
    for k in range(n):
        out[k] /= total


@njit(cache=True)
def lr_proba(w, bias, z, n_numeric, n_classes, out) -> None:  # type: ignore[no-untyped-def]
    """``out[k] = softmax_k(bias_k + sum_f w_kf z_f)`` for ``k < n_classes``."""
    for k in range(n_classes):
        s = bias[k, 0]
        for f in range(n_numeric):
            s += w[k, f] * z[f]
        out[k] = s
    _softmax(out, n_classes)


@njit(cache=True, error_model="numpy")
def lr_learn(w, bias, scale, z, num_row, n_numeric, n_classes, y, q, acc) -> None:  # type: ignore[no-untyped-def]
    """One AdaGrad step of the regression on an example of class ``y`` whose standardised
    values are ``z`` and whose current prediction is ``q = softmax(bias + w z)``
    (:func:`lr_proba`), then add its raw values to the running scales (Welford; a value whose
    update would overflow the mean or ``m2`` is left out). ``acc`` is
    scratch of at least ``2 * n_numeric``.

    With ``r_k = q_k - [k = y]``, the gradient of the log loss plus ``L2 / 2 |w|^2`` is
    ``g_kf = r_k z_f + L2 w_kf`` (``r_k`` for the intercept). The weights of one column share
    one accumulator, ``G_f += (1/K) sum_k g_kf^2``, and move by ``-ETA g_kf / sqrt(G_f + 1e-8)``
    (one square root a column, not one a weight: ``docs/decisions/regression-step.md``); an
    intercept keeps its own.

    The loops run over a class's row of ``w`` (contiguous), every column at once: each
    column's sum still adds its classes in order, so the bits are those of a loop column by
    column, and the compiler vectorises across columns (``error_model="numpy"``: no
    zero-divisor check to branch on; no divisor here can be zero): what that gained,
    ``docs/decisions/regression-step.md``."""
    total, step = acc[:n_numeric], acc[n_numeric : 2 * n_numeric]
    total[:] = 0.0
    for k in range(n_classes):
        r = q[k] - (1.0 if k == y else 0.0)
        bias[k, 1] += r * r
        bias[k, 0] -= ETA * r / math.sqrt(bias[k, 1] + 1e-8)
        wk = w[k]
        for f in range(n_numeric):
            g = r * z[f] + L2 * wk[f]
            total[f] += g * g
    for f in range(n_numeric):
        scale[f, 3] += total[f] / n_classes
        step[f] = ETA / math.sqrt(scale[f, 3] + 1e-8)
    for k in range(n_classes):
        r = q[k] - (1.0 if k == y else 0.0)
        wk = w[k]
        for f in range(n_numeric):
            wk[f] -= step[f] * (r * z[f] + L2 * wk[f])
    for f in range(n_numeric):
        x = num_row[f]
        if x != x:
            continue
        n = scale[f, 0] + 1.0
        d = x - scale[f, 1]
        mean = scale[f, 1] + d / n
        m2 = scale[f, 2] + d * (x - mean)
        if mean - mean != 0.0 or m2 - m2 != 0.0:  # overflowed (|x| near the float range): not counted
            continue
        scale[f, 0] = n
        scale[f, 1] = mean
        scale[f, 2] = m2


@njit(cache=True)
def mix_pool(p_tree, p_lr, a, b, n_classes, out) -> None:  # type: ignore[no-untyped-def]
    """``out[k] = softmax_k(a log p_tree_k + b log p_lr_k)`` (probabilities floored at
    ``1e-15`` inside the logarithms); ``out`` may be ``p_tree``."""
    for k in range(n_classes):
        out[k] = a * math.log(max(p_tree[k], 1e-15)) + b * math.log(max(p_lr[k], 1e-15))
    _softmax(out, n_classes)


@njit(cache=True)
def uncertainty(p_tree, n_classes) -> float:  # type: ignore[no-untyped-def]
    """``u = 1 - max_k p_tree_k``: 0 where the tree is sure, up to ``1 - 1/K``."""
    top = 0.0
    for k in range(n_classes):
        if p_tree[k] > top:
            top = p_tree[k]
    return 1.0 - top


@njit(cache=True)
def mix_score(mix_a, mix_b, mix_y, mix_u, n_scored, p_tree, p_lr, n_classes, y) -> None:  # type: ignore[no-untyped-def]
    """Keep an example scored before it was learned at row ``n_scored % WINDOW``; the caller
    increments ``n_scored``."""
    i = n_scored % WINDOW
    for k in range(n_classes):
        mix_a[i, k] = math.log(max(p_tree[k], 1e-15))
        mix_b[i, k] = math.log(max(p_lr[k], 1e-15))
    mix_y[i] = y
    mix_u[i] = uncertainty(p_tree, n_classes)


@njit(cache=True)
def refit_due(n_scored) -> bool:  # type: ignore[no-untyped-def]
    """Whether the pool is refitted once ``n_scored`` examples have been scored: every
    ``MIX_EVERY`` up to ``MIX_SETTLE``, then every ``MIX_EVERY_SETTLED``.

    A refit reads the whole window (``WINDOW`` rows, each a softmax over the classes), so
    refitting every 100 examples throughout cost more than the rest of the component. The
    weights move most while the regression is young (and after a change, which restarts the
    count); later, a refit every 500 examples still sees every example twice. Both measured:
    ``docs/decisions/linear-component.md``."""
    if n_scored <= MIX_SETTLE:
        return n_scored % MIX_EVERY == 0
    return n_scored % MIX_EVERY_SETTLED == 0


@njit(cache=True)
def mix_fit(mix_a, mix_b, mix_y, mix_u, n_scored, n_classes, a, b, c):  # type: ignore[no-untyped-def]
    """Projected Newton steps on the window's penalised log loss; returns the new ``(a, b, c)``.

    Over the ``m = min(n_scored, WINDOW)`` kept rows, with features ``f_ik = (A_ik, B_ik,
    u_i B_ik)``, ``s_ik = (a, b, c) . f_ik`` and ``q_i = softmax(s_i)``:

    .. math::

        g = \\sum_i (\\mathbb{E}_{q_i}[f_i] - f_{i y_i}) + P ((a, b, c) - (1, 0, 0)), \\qquad
        H = \\sum_i \\operatorname{Cov}_{q_i}(f_i) + (P + R m) I,

    ``(a, b, c) <- (a, b, c) - H^{-1} g`` (the 3x3 system solved by cofactors), then ``a``
    clipped to ``[0, 1]`` and ``b``, ``c`` to ``>= 0``, ``NEWTON_STEPS`` times (``P = PRIOR``,
    ``R = RIDGE``)."""
    m = min(n_scored, WINDOW)
    if m == 0:
        return a, b, c
    q = np.empty(max(n_classes, 1))
    for _ in range(NEWTON_STEPS):
        g0 = g1 = g2 = 0.0
        h00 = h01 = h02 = h11 = h12 = h22 = 0.0
        for i in range(m):
            u = mix_u[i]
            top = -math.inf
            for k in range(n_classes):
                s = a * mix_a[i, k] + (b + c * u) * mix_b[i, k]
                q[k] = s
                if s > top:
                    top = s
            total = 0.0
            for k in range(n_classes):
                q[k] = math.exp(q[k] - top)
                total += q[k]
            e0 = e1 = 0.0
            e00 = e01 = e11 = 0.0
            for k in range(n_classes):
                p = q[k] / total
                fa = mix_a[i, k]
                fb = mix_b[i, k]
                e0 += p * fa
                e1 += p * fb
                e00 += p * fa * fa
                e01 += p * fa * fb
                e11 += p * fb * fb
            y = mix_y[i]
            # the third feature is u times the second: its moments are u times theirs
            g0 += e0 - mix_a[i, y]
            g1 += e1 - mix_b[i, y]
            g2 += u * (e1 - mix_b[i, y])
            v00 = e00 - e0 * e0
            v01 = e01 - e0 * e1
            v11 = e11 - e1 * e1
            h00 += v00
            h01 += v01
            h02 += u * v01
            h11 += v11
            h12 += u * v11
            h22 += u * u * v11
        g0 += PRIOR * (a - 1.0)
        g1 += PRIOR * b
        g2 += PRIOR * c
        ridge = PRIOR + RIDGE * m
        h00 += ridge
        h11 += ridge
        h22 += ridge
        c00 = h11 * h22 - h12 * h12
        c01 = h02 * h12 - h01 * h22
        c02 = h01 * h12 - h11 * h02
        c11 = h00 * h22 - h02 * h02
        c12 = h01 * h02 - h00 * h12
        c22 = h00 * h11 - h01 * h01
        det = h00 * c00 + h01 * c01 + h02 * c02
        a = a - (c00 * g0 + c01 * g1 + c02 * g2) / det
        b = b - (c01 * g0 + c11 * g1 + c12 * g2) / det
        c = c - (c02 * g0 + c12 * g1 + c22 * g2) / det
        a = min(max(a, 0.0), 1.0)
        b = max(b, 0.0)
        c = max(c, 0.0)
    return a, b, c
