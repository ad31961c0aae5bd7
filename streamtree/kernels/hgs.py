"""Hierarchical Gradient Smoothing: the leave-one-out objective, its fitting and prediction.

Notation as in :mod:`streamtree.smoothing.hgs` (and ``docs/library/hgs.md``): nodes
``0..n-1`` with ``parent[0] = -1`` and ``parent[i] < i``, ``K`` classes, counts ``c[i, k]``
and ``c[i, .]`` their sum, weights ``alpha[p]`` on internal nodes and ``alpha0`` on a uniform
pseudo-node above the root.

Because every parent precedes its children, a sum over a node's ancestors is one forward pass
over the node index (``A[i] = A[parent[i]] + a[parent[i]]``) and a sum over its subtree one
backward pass (``U[parent[i]] += U[i]``): an evaluation of the cost and its gradient is
O(n K) with no preorder, no Topology and no Python loop.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.hgs_loss import evaluate, prepare
from streamtree.state import ALPHA, GRAD, STEP, THETA

__all__ = ["LOG_ALPHA_MAX", "LOG_ALPHA_MIN", "loocv", "node_proba", "refit_online", "refit_paper", "sync_alpha"]

#: online mode keeps every log-weight in [log 1e-4, log 1e6]
LOG_ALPHA_MIN, LOG_ALPHA_MAX = math.log(1e-4), math.log(1e6)
#: iRprop- step sizes stay in [STEP_MIN, STEP_MAX]; a step grows by STEP_UP, shrinks by STEP_DOWN
STEP_MIN, STEP_MAX, STEP_UP, STEP_DOWN = 1e-6, 1.0, 1.2, 0.5


@njit(cache=True)
def loocv(
    parent: np.ndarray,
    internal: np.ndarray,
    counts: np.ndarray,
    n: int,
    n_classes: int,
    alpha: np.ndarray,
    alpha0: float,
    grad: np.ndarray,
) -> tuple[float, float]:
    """HGS's leave-one-out cost (bits per example) and its gradient (Eq. 5-8, pseudo-node).

    With ``th[p, k] = (c[p, k] - 1) / (c[p, .] - 1)`` (0 when ``c[p, .] <= 1``, numerator
    floored at 0), ``a[p] = alpha[p]`` on internal nodes (0 on leaves), and for every leaf
    ``l`` and class ``k`` with ``c[l, k] > 0``::

        A[l]    = sum_{p in anc(l)} a[p],      B[l, k] = sum_{p in anc(l)} a[p] th[p, k]
        D[l]    = max(c[l, .] - 1, 0) + A[l] + alpha0
        q[l, k] = (max(c[l, k] - 1, 0) + B[l, k] + alpha0 / K) / D[l]
        cost    = -(1 / N) sum_{l, k} c[l, k] log2 q[l, k],        N = sum_{l leaf} c[l, .]

    and with ``w = c / (D q)``, ``U[p] = sum_{l below p} sum_k w q``,
    ``W[p, k] = sum_{l below p} w[l, k]``::

        grad[p] = (U[p] - sum_k th[p, k] W[p, k]) / (N ln 2)      (internal p; 0 on leaves)
        grad0   = (U[root] - sum_k W[root, k] / K) / (N ln 2)

    A term with ``q <= 0`` or not finite (a class seen once in the whole tree and
    ``alpha0 = 0``) is constant in every weight: it makes the cost ``inf`` and is left out of
    the gradient. With no example at any leaf the cost and gradient are 0.

    Parameters
    ----------
    parent
        int64 ``(>= n,)``: ``parent[0] = -1`` and ``0 <= parent[i] < i``.
    internal
        bool ``(>= n,)``: whether each node has children.
    counts
        float64 ``(>= n, >= K)``: the counts the objective reads (honest counts); columns
        ``>= n_classes`` are ignored.
    n, n_classes
        Number of nodes and of classes ``K``.
    alpha
        float64 ``(>= n,)`` weights (read on internal nodes only).
    alpha0
        Weight of the uniform pseudo-node.
    grad
        float64 ``(>= n,)`` output: ``grad[:n]``.

    Returns
    -------
    cost, grad0
        The cost in bits per example and its derivative w.r.t. ``alpha0``.
    """
    th = np.empty((n, n_classes))
    loo_total = np.empty(n)
    n_leaf = prepare(internal, counts, n, n_classes, th, loo_total)
    return evaluate(
        parent,
        internal,
        counts,
        n,
        n_classes,
        alpha,
        alpha0,
        th,
        loo_total,
        n_leaf,
        np.empty(n),
        np.empty((n, n_classes)),
        np.empty(n),
        np.empty((n, n_classes)),
        grad,
        True,
    )


@njit(cache=True)
def refit_online(
    parent: np.ndarray,
    internal: np.ndarray,
    counts: np.ndarray,
    n: int,
    n_classes: int,
    hgs: np.ndarray,
    scal: np.ndarray,
    steps: int,
) -> float:
    """``steps`` iRprop- steps on HGS's log-weights, in place; returns the last cost.

    Parameters are ``theta = log alpha`` for every node ``i < n`` (``hgs[i, THETA]``) and
    ``theta0 = log alpha0`` for the pseudo-node (``scal[0]``), each with a step size
    (``hgs[i, STEP]``, ``scal[1]``) and the previous step's gradient (``hgs[i, GRAD]``,
    ``scal[2]``). One step, for every parameter with ``g`` its log-space gradient
    ``alpha * d cost / d alpha`` (0 on leaves; :func:`loocv`) and ``g'`` the previous one::

        step  = clip(step * (1.2 if g g' > 0 else 0.5 if g g' < 0 else 1), 1e-6, 1)
        g     = 0 if g g' < 0 else g                  (skip the move when the sign flips)
        theta = clip(theta - sign(g) step, log 1e-4, log 1e6)
        g'    = g

    Parameters
    ----------
    parent, internal, counts, n, n_classes
        As in :func:`loocv`.
    hgs
        float64 ``(>= n, 4)``; columns ``THETA``, ``STEP``, ``GRAD`` read and written, and
        ``ALPHA`` written: ``exp(theta)`` of every node ``i < n`` after the last step (what the
        prediction kernels read, :mod:`streamtree.state`).
    scal
        float64 ``(3,)``: ``theta0``, ``step0``, ``grad0``, read and written.
    steps
        Number of steps.

    Returns
    -------
    float
        The cost (bits per example) evaluated at the start of the last step (NaN if
        ``steps < 1``).
    """
    th = np.empty((n, n_classes))
    loo_total = np.empty(n)
    n_leaf = prepare(internal, counts, n, n_classes, th, loo_total)
    acc_a = np.empty(n)
    acc_b = np.empty((n, n_classes))
    sub_u = np.empty(n)
    sub_w = np.empty((n, n_classes))
    grad = np.empty(n)
    alpha = np.zeros(n)
    cost = math.nan
    for step_index in range(steps):
        for i in range(n):
            if internal[i]:
                alpha[i] = math.exp(hgs[i, THETA])
        alpha0 = math.exp(scal[0])
        cost, grad0 = evaluate(
            parent,
            internal,
            counts,
            n,
            n_classes,
            alpha,
            alpha0,
            th,
            loo_total,
            n_leaf,
            acc_a,
            acc_b,
            sub_u,
            sub_w,
            grad,
            step_index == steps - 1,
        )
        for i in range(n):
            g = grad[i] * alpha[i] if internal[i] else 0.0
            hgs[i, THETA], hgs[i, STEP], hgs[i, GRAD] = _irprop(hgs[i, THETA], hgs[i, STEP], hgs[i, GRAD], g)
        scal[0], scal[1], scal[2] = _irprop(scal[0], scal[1], scal[2], grad0 * alpha0)
    sync_alpha(hgs, n)
    return cost


@njit(cache=True)
def sync_alpha(hgs: np.ndarray, n: int) -> None:
    """``hgs[i, ALPHA] = exp(hgs[i, THETA])`` for ``i < n``: the weights the prediction kernels
    read, computed by the same compiled ``exp`` wherever they are set (a refit, a loaded file),
    so that a weight kept is bit for bit the one computed."""
    for i in range(n):
        hgs[i, ALPHA] = math.exp(hgs[i, THETA])


@njit(cache=True)
def _irprop(theta: float, step: float, previous: float, g: float) -> tuple[float, float, float]:
    """One iRprop- update of one parameter: new (theta, step, gradient kept)."""
    agree = g * previous
    if agree > 0:
        step = step * STEP_UP
    elif agree < 0:
        step = step * STEP_DOWN
        g = 0.0
    step = min(max(step, STEP_MIN), STEP_MAX)
    if g > 0:
        theta = theta - step
    elif g < 0:
        theta = theta + step
    theta = min(max(theta, LOG_ALPHA_MIN), LOG_ALPHA_MAX)
    return theta, step, g


@njit(cache=True)
def refit_paper(
    parent: np.ndarray,
    internal: np.ndarray,
    counts: np.ndarray,
    n: int,
    n_classes: int,
    learning_rate: float,
    tol: float,
    max_iter: int,
    alpha_out: np.ndarray,
) -> float:
    """Algorithm 1 of the HGS paper: projected gradient descent from ``alpha = 1``.

    Starting from ``alpha[p] = 1`` on internal nodes (0 on leaves), no pseudo-node
    (``alpha0 = 0``), at most ``max_iter`` times::

        candidate = max(alpha - learning_rate * grad, 0)
        stop (keeping alpha)      if cost(alpha) - cost(candidate) is not > 0 (inf included)
        alpha = candidate; stop   if the improvement is < tol

    Parameters
    ----------
    parent, internal, counts, n, n_classes
        As in :func:`loocv`.
    learning_rate, tol, max_iter
        The descent's step, stopping improvement and iteration limit.
    alpha_out
        float64 ``(>= n,)`` output: the fitted weights in ``alpha_out[:n]``.

    Returns
    -------
    float
        The cost (bits per example) at the returned weights.
    """
    th = np.empty((n, n_classes))
    loo_total = np.empty(n)
    n_leaf = prepare(internal, counts, n, n_classes, th, loo_total)
    acc_a = np.empty(n)
    acc_b = np.empty((n, n_classes))
    sub_u = np.empty(n)
    sub_w = np.empty((n, n_classes))
    alpha = np.empty(n)
    for i in range(n):
        alpha[i] = 1.0 if internal[i] else 0.0
    candidate = np.empty(n)
    grad = np.empty(n)
    new_grad = np.empty(n)
    cost, _ = evaluate(
        parent,
        internal,
        counts,
        n,
        n_classes,
        alpha,
        0.0,
        th,
        loo_total,
        n_leaf,
        acc_a,
        acc_b,
        sub_u,
        sub_w,
        grad,
        True,
    )
    for _ in range(max_iter):
        for i in range(n):
            candidate[i] = max(alpha[i] - learning_rate * grad[i], 0.0)
        new_cost, _ = evaluate(
            parent,
            internal,
            counts,
            n,
            n_classes,
            candidate,
            0.0,
            th,
            loo_total,
            n_leaf,
            acc_a,
            acc_b,
            sub_u,
            sub_w,
            new_grad,
            True,
        )
        improvement = cost - new_cost
        if not improvement > 0:  # also stops on an infinite (constant) cost
            break
        alpha, candidate = candidate, alpha
        grad, new_grad = new_grad, grad
        cost = new_cost
        if improvement < tol:
            break
    for i in range(n):
        alpha_out[i] = alpha[i]
    return cost


@njit(cache=True)
def node_proba(
    parent: np.ndarray,
    internal: np.ndarray,
    counts: np.ndarray,
    n: int,
    n_classes: int,
    alpha: np.ndarray,
    alpha0: float,
    out: np.ndarray,
) -> None:
    """HGS probabilities at every node (Eq. 4 plus the pseudo-node), into ``out[:n, :K]``.

    Each node is treated as the leaf it would be. With ``a[p] = alpha[p]`` on internal nodes
    with ``c[p, .] > 0`` (an ancestor with no counts has no estimate: 0 elsewhere)::

        out[i, k] = (c[i, k] + alpha0 / K + sum_{p in anc(i)} a[p] c[p, k] / c[p, .])
                    / (c[i, .] + alpha0 + sum_{p in anc(i)} a[p])

    and ``1 / K`` where that denominator is 0.

    Parameters
    ----------
    parent, internal, counts, n, n_classes
        As in :func:`loocv`.
    alpha
        float64 ``(>= n,)`` weights (not log-weights).
    alpha0
        Weight of the uniform pseudo-node.
    out
        float64 ``(>= n, >= K)`` output.
    """
    if n <= 0 or n_classes <= 0:
        return
    total = np.empty(n)
    acc_a = np.empty(n)
    prior = alpha0 / n_classes
    # forward: out[i] holds B[i, k] = sum_{p in anc(i)} a[p] c[p, k] / c[p, .] for now
    for i in range(n):
        t = 0.0
        for k in range(n_classes):
            t += counts[i, k]
        total[i] = t
        if i == 0:
            acc_a[0] = 0.0
            for k in range(n_classes):
                out[0, k] = 0.0
            continue
        p = parent[i]
        if internal[p] and total[p] > 0:
            a = alpha[p]
            acc_a[i] = acc_a[p] + a
            for k in range(n_classes):
                out[i, k] = out[p, k] + a * (counts[p, k] / total[p])
        else:
            acc_a[i] = acc_a[p]
            for k in range(n_classes):
                out[i, k] = out[p, k]
    uniform = 1.0 / n_classes
    for i in range(n):
        denom = total[i] + (acc_a[i] + alpha0)
        if denom > 0:
            for k in range(n_classes):
                out[i, k] = (counts[i, k] + (out[i, k] + prior)) / denom
        else:
            for k in range(n_classes):
                out[i, k] = uniform
