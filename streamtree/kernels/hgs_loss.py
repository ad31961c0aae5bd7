"""HGS's leave-one-out objective, apart from the optimisers that descend it (:mod:`streamtree.kernels.hgs`).

:func:`prepare` computes the parts of the cost that do not depend on the weights, once per
refit; :func:`evaluate` the cost (bits per example) and its gradient at given weights, once per
step. The maths and notation: :func:`streamtree.kernels.hgs.loocv`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

LN2 = math.log(2.0)


@njit(cache=True)
def prepare(
    internal: np.ndarray, counts: np.ndarray, n: int, n_classes: int, th: np.ndarray, loo_total: np.ndarray
) -> float:
    """Weight-free parts of the objective; returns ``N``, the number of examples at leaves.

    ``th[p, k] = max(c[p, k] - 1, 0) / (c[p, .] - 1)`` on internal nodes with ``c[p, .] > 1``
    and 0 elsewhere; ``loo_total[l] = max(c[l, .] - 1, 0)``.
    """
    n_leaf = 0.0
    for i in range(n):
        total = 0.0
        for k in range(n_classes):
            total += counts[i, k]
        loo_total[i] = max(total - 1.0, 0.0)
        if internal[i] and total > 1.0:
            loo = total - 1.0  # divided, not multiplied by a reciprocal: a pure node's th is 1
            for k in range(n_classes):
                th[i, k] = max(counts[i, k] - 1.0, 0.0) / loo
        else:
            for k in range(n_classes):
                th[i, k] = 0.0
            if not internal[i]:
                n_leaf += total
    return n_leaf


@njit(cache=True)
def evaluate(
    parent: np.ndarray,
    internal: np.ndarray,
    counts: np.ndarray,
    n: int,
    n_classes: int,
    alpha: np.ndarray,
    alpha0: float,
    th: np.ndarray,
    loo_total: np.ndarray,
    n_leaf: float,
    acc_a: np.ndarray,
    acc_b: np.ndarray,
    sub_u: np.ndarray,
    sub_w: np.ndarray,
    grad: np.ndarray,
    want_cost: bool,
) -> tuple[float, float]:
    """Cost (NaN unless ``want_cost``) and ``grad0``; writes ``grad[:n]`` (see :func:`loocv`).

    Scratch: ``acc_a (n,)``, ``acc_b (n, K)`` (ancestor sums), ``sub_u (n,)``, ``sub_w (n, K)``
    (subtree sums).
    """
    if n <= 0 or n_classes <= 0 or not n_leaf > 0:
        for i in range(n):
            grad[i] = 0.0
        return 0.0, 0.0
    prior = alpha0 / n_classes
    log_sum = 0.0
    finite = True
    # forward: A[i] = sum_{p in anc(i)} alpha[p], B[i, k] = sum_{p in anc(i)} alpha[p] th[p, k]
    # (stored for internal nodes only, a leaf's are used at once); at a leaf, q and
    # w = c / (D q) = c / numerator, and the leaf's own U = sum_k w q, W = w
    for i in range(n):
        p = parent[i] if i > 0 else -1
        a = 0.0
        if p >= 0:
            if internal[p]:
                a = alpha[p]
            acc = acc_a[p] + a
        else:
            acc = 0.0
        if internal[i]:
            acc_a[i] = acc
            if p >= 0:
                for k in range(n_classes):
                    acc_b[i, k] = acc_b[p, k] + a * th[p, k]
            else:
                for k in range(n_classes):
                    acc_b[i, k] = 0.0
            for k in range(n_classes):
                sub_w[i, k] = 0.0
            sub_u[i] = 0.0
            continue
        # q is a division, not a product with 1 / D: with one class q is then exactly 1 and
        # the gradient exactly 0 (iRprop- reads only its sign)
        denom = loo_total[i] + acc + alpha0
        u = 0.0
        for k in range(n_classes):
            c = counts[i, k]
            w = 0.0
            if c > 0:
                b = acc_b[p, k] + a * th[p, k] if p >= 0 else 0.0
                num = max(c - 1.0, 0.0) + b + prior
                q = num / denom if denom != 0 else math.nan
                if q > 0 and q < math.inf:
                    w = c / num
                    u += w * q
                    if want_cost:
                        log_sum += c * math.log(q)
                else:
                    finite = False  # constant in every weight: excluded from the gradient
            sub_w[i, k] = w
        sub_u[i] = u
    # backward: children (higher indices) are complete before their parent is reached
    scale = 1.0 / (n_leaf * LN2)
    for i in range(n - 1, -1, -1):
        if internal[i]:
            tw = 0.0
            for k in range(n_classes):
                tw += th[i, k] * sub_w[i, k]
            grad[i] = (sub_u[i] - tw) * scale
        else:
            grad[i] = 0.0
        if i > 0:
            p = parent[i]
            sub_u[p] += sub_u[i]
            for k in range(n_classes):
                sub_w[p, k] += sub_w[i, k]
    w_root = 0.0
    for k in range(n_classes):
        w_root += sub_w[0, k]
    grad0 = (sub_u[0] - w_root / n_classes) * scale
    if not finite:
        cost = math.inf
    elif want_cost:
        cost = -log_sum / (n_leaf * LN2)
    else:
        cost = math.nan
    return cost, grad0
