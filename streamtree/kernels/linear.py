"""The linear component: an online softmax regression on the numeric features, pooled with the
tree's smoothed probabilities by weights fitted online on a prequential window.

A tree's leaves are constant distributions: where the posterior is smooth in the features
(a linear or gently curved concept inside a leaf), they step through it. One multinomial
logistic regression on the standardised numeric features, learned from every example the
tree learns, sees what the partition cannot; the served probability is their log-linear pool

.. math::

    p_k \\propto \\exp(a \\log p^{tree}_k + b \\log p^{lr}_k), \\qquad a \\in [0, 1],\\; b \\ge 0,

with ``(a, b)`` fitted every ``MIX_EVERY`` examples by projected Newton steps on the log loss of
the last ``WINDOW`` examples *as they were predicted before being learned* (a prequential
objective: it sees time, which the leave-one-out objective of the counts cannot), penalised
toward ``(1, 0)``, the tree alone, by ``PRIOR / 2 ((a - 1)^2 + b^2)``. The penalty keeps a
weight at the tree's until the window shows the regression helps; ``a < 1`` lets a tree that
is confidently stepped be softened where the regression carries the signal. A detected change
sets ``(a, b) = (1, 0)`` and empties the window (the regression fitted the old concept).

Arrays (per tree; :mod:`streamtree.state`):

- ``lr_scale[f] = (n, mean, m2, G)``: Welford's running count, mean and sum of squared
  deviations of numeric column ``f`` (missing values skipped), and the AdaGrad accumulator
  its weights share;
- ``lr_w[k, f]``: the weight of column ``f`` for class ``k``; ``lr_bias[k] = (w, G)`` the
  intercept of class ``k`` and its own accumulator;
- ``mix_a[i, k] = log p^{tree}_k``, ``mix_b[i, k] = log p^{lr}_k`` and ``mix_y[i]`` of the
  window's row ``i = n_scored % WINDOW`` (floored at ``1e-15``; columns of classes unknown
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
    "CLIP", "ETA", "L2", "MIX_EVERY", "PRIOR", "WINDOW", "lr_learn", "lr_proba", "mix_fit", "mix_pool", "mix_score",
    "standardise",
]

MIX_EVERY = 100  # the pool is refitted every this many scored examples
NEWTON_STEPS = 1  # warm-started every 100 examples: 1, 2 and 5 steps measured the same
PRIOR = 5.0  # strength of the pull toward (a, b) = (1, 0), in examples
RIDGE = 1e-3  # per example: keeps the 2x2 Newton system well posed
ETA = 0.1  # AdaGrad's step
L2 = 1e-4  # weight decay of the regression's weights (not the intercepts)
CLIP = 5.0  # standardised values are clipped to [-CLIP, CLIP]
LOG_FLOOR = math.log(1e-15)


@njit(cache=True)
def standardise(scale, num_row, n_numeric, z) -> None:  # type: ignore[no-untyped-def]
    """``z[f] = clip((x_f - mean_f) / sd_f, -CLIP, CLIP)`` for ``f < n_numeric``, with
    ``sd_f = sqrt(m2_f / (n_f - 1))``; 0 for a missing value, a column seen fewer than twice
    or one that never varied."""
    for f in range(n_numeric):
        x = num_row[f]
        n = scale[f, 0]
        v = 0.0
        if x == x and n > 1.0 and scale[f, 2] > 0.0:
            v = (x - scale[f, 1]) / math.sqrt(scale[f, 2] / (n - 1.0))
            if v > CLIP:
                v = CLIP
            elif v < -CLIP:
                v = -CLIP
        z[f] = v


@njit(cache=True)
def lr_proba(w, bias, z, n_numeric, n_classes, out) -> None:  # type: ignore[no-untyped-def]
    """``out[k] = softmax_k(bias_k + sum_f w_kf z_f)`` for ``k < n_classes``."""
    top = -math.inf
    for k in range(n_classes):
        s = bias[k, 0]
        for f in range(n_numeric):
            s += w[k, f] * z[f]
        out[k] = s
        if s > top:
            top = s
    total = 0.0
    for k in range(n_classes):
        out[k] = math.exp(out[k] - top)
        total += out[k]
    for k in range(n_classes):
        out[k] /= total


@njit(cache=True)
def lr_learn(w, bias, scale, z, num_row, n_numeric, n_classes, y, q) -> None:  # type: ignore[no-untyped-def]
    """One AdaGrad step of the regression on an example of class ``y`` whose standardised
    values are ``z`` and whose current prediction is ``q = softmax(bias + w z)``
    (:func:`lr_proba`), then add its raw values to the running scales (Welford).

    With ``r_k = q_k - [k = y]``, the gradient of the log loss plus ``L2 / 2 |w|^2`` is
    ``g_kf = r_k z_f + L2 w_kf`` (``r_k`` for the intercept). The weights of one column share
    one accumulator, ``G_f += (1/K) sum_k g_kf^2``, and move by ``-ETA g_kf / sqrt(G_f + 1e-8)``
    (one square root a column, not one a weight: a per-weight accumulator took 1 us an
    example at 10 classes and 24 columns, and gave the same log losses on the 25 bench
    streams within 2%); an intercept keeps its own."""
    for k in range(n_classes):
        r = q[k] - (1.0 if k == y else 0.0)
        bias[k, 1] += r * r
        bias[k, 0] -= ETA * r / math.sqrt(bias[k, 1] + 1e-8)
    for f in range(n_numeric):
        total = 0.0
        for k in range(n_classes):
            g = (q[k] - (1.0 if k == y else 0.0)) * z[f] + L2 * w[k, f]
            total += g * g
        scale[f, 3] += total / n_classes
        step = ETA / math.sqrt(scale[f, 3] + 1e-8)
        for k in range(n_classes):
            w[k, f] -= step * ((q[k] - (1.0 if k == y else 0.0)) * z[f] + L2 * w[k, f])
    for f in range(n_numeric):
        x = num_row[f]
        if x != x:
            continue
        n = scale[f, 0] + 1.0
        d = x - scale[f, 1]
        scale[f, 0] = n
        scale[f, 1] += d / n
        scale[f, 2] += d * (x - scale[f, 1])


@njit(cache=True)
def mix_pool(p_tree, p_lr, a, b, n_classes, out) -> None:  # type: ignore[no-untyped-def]
    """``out[k] = softmax_k(a log p_tree_k + b log p_lr_k)`` (probabilities floored at
    ``1e-15`` inside the logarithms); ``out`` may be ``p_tree``."""
    top = -math.inf
    for k in range(n_classes):
        s = a * math.log(max(p_tree[k], 1e-15)) + b * math.log(max(p_lr[k], 1e-15))
        out[k] = s
        if s > top:
            top = s
    total = 0.0
    for k in range(n_classes):
        out[k] = math.exp(out[k] - top)
        total += out[k]
    for k in range(n_classes):
        out[k] /= total


@njit(cache=True)
def mix_score(mix_a, mix_b, mix_y, n_scored, p_tree, p_lr, n_classes, y) -> None:  # type: ignore[no-untyped-def]
    """Keep an example scored before it was learned at row ``n_scored % WINDOW``; the caller
    increments ``n_scored``."""
    i = n_scored % WINDOW
    for k in range(n_classes):
        mix_a[i, k] = math.log(max(p_tree[k], 1e-15))
        mix_b[i, k] = math.log(max(p_lr[k], 1e-15))
    mix_y[i] = y


@njit(cache=True)
def mix_fit(mix_a, mix_b, mix_y, n_scored, n_classes, a, b):  # type: ignore[no-untyped-def]
    """Projected Newton steps on the window's penalised log loss; returns the new ``(a, b)``.

    Over the ``m = min(n_scored, WINDOW)`` kept rows, with ``s_ik = a A_ik + b B_ik``,
    ``q_i = softmax(s_i)`` and ``c_i = (A_i, B_i)``:

    .. math::

        g = \\sum_i (\\mathbb{E}_{q_i}[c_i] - c_{i y_i}) + P ((a, b) - (1, 0)), \\qquad
        H = \\sum_i \\operatorname{Cov}_{q_i}(c_i) + (P + R m) I,

    ``(a, b) <- (a, b) - H^{-1} g``, then ``a`` clipped to ``[0, 1]`` and ``b`` to ``>= 0``,
    ``NEWTON_STEPS`` times (``P = PRIOR``, ``R = RIDGE``)."""
    m = min(n_scored, WINDOW)
    if m == 0:
        return a, b
    q = np.empty(max(n_classes, 1))
    for _ in range(NEWTON_STEPS):
        ga = 0.0
        gb = 0.0
        haa = 0.0
        hab = 0.0
        hbb = 0.0
        for i in range(m):
            top = -math.inf
            for k in range(n_classes):
                s = a * mix_a[i, k] + b * mix_b[i, k]
                q[k] = s
                if s > top:
                    top = s
            total = 0.0
            for k in range(n_classes):
                q[k] = math.exp(q[k] - top)
                total += q[k]
            ea = 0.0
            eb = 0.0
            eaa = 0.0
            eab = 0.0
            ebb = 0.0
            for k in range(n_classes):
                p = q[k] / total
                ea += p * mix_a[i, k]
                eb += p * mix_b[i, k]
                eaa += p * mix_a[i, k] * mix_a[i, k]
                eab += p * mix_a[i, k] * mix_b[i, k]
                ebb += p * mix_b[i, k] * mix_b[i, k]
            y = mix_y[i]
            ga += ea - mix_a[i, y]
            gb += eb - mix_b[i, y]
            haa += eaa - ea * ea
            hab += eab - ea * eb
            hbb += ebb - eb * eb
        ga += PRIOR * (a - 1.0)
        gb += PRIOR * b
        ridge = PRIOR + RIDGE * m
        haa += ridge
        hbb += ridge
        det = haa * hbb - hab * hab
        a = a - (hbb * ga - hab * gb) / det
        b = b - (haa * gb - hab * ga) / det
        a = min(max(a, 0.0), 1.0)
        b = max(b, 0.0)
    return a, b
