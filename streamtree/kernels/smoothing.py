"""Leaf probabilities along one root-to-node path: the per-event prediction kernel.

One kernel serves every smoother of :mod:`streamtree.smoothing` that the online tree can use,
selected by an integer code (module constants ``MLE``, ``LAPLACE``, ``MESTIMATE``,
``MBRANCH``, ``HGS``). It reads the tree's ``counts`` and ``hgs`` arrays
(:mod:`streamtree.state`) and writes the ``K`` probabilities into a caller-owned buffer:
nothing is allocated per call.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.state import ALPHA

__all__ = ["HGS", "LAPLACE", "MBRANCH", "MESTIMATE", "MLE", "every_node_proba", "path_proba"]

#: smoother codes accepted by :func:`path_proba`
MLE, LAPLACE, MESTIMATE, MBRANCH, HGS = 0, 1, 2, 3, 4


@njit(cache=True)
def path_proba(
    smoother: int,
    m: float,
    counts: np.ndarray,
    hgs: np.ndarray,
    theta0: float,
    path: np.ndarray,
    length: int,
    n_classes: int,
    out: np.ndarray,
) -> None:
    """Class probabilities at node ``path[length - 1]``, written into ``out[:n_classes]``.

    With ``l = path[length - 1]``, ``v_1 = path[0]`` the root, ``K = n_classes``,
    ``n[i, k] = counts[i, k]`` (columns ``>= K`` are ignored) and ``n[i, .]`` their sum:

    - ``MLE``: ``n[v, k] / n[v, .]`` at the nearest node ``v`` of the path (from ``l`` up)
      with ``n[v, .] > 0``; ``1 / K`` when the whole path is empty (no floor: absent
      classes get exactly 0);
    - ``LAPLACE``: ``(n[l, k] + 1) / (n[l, .] + K)``;
    - ``MESTIMATE`` (uniform base rate): ``(n[l, k] + m / K) / (n[l, .] + m)``;
    - ``MBRANCH``: ``t_0 = 1 / K``, ``t_j = (n[v_j, k] + m_j t_{j-1}) / (n[v_j, .] + m_j)``
      for ``j = 1 .. L`` (``L = length``) with ``m_j = 1 + (1 - 1 / (L - j + 1)) sqrt(n[0, .])``;
      the result is ``t_L`` (``m`` is not used);
    - ``HGS`` (online weights ``alpha[p] = hgs[p, ALPHA]``, that is ``exp(hgs[p, THETA])``,
      and ``alpha0 = exp(theta0)``)::

          (n[l, k] + alpha0 / K + sum_{p} alpha[p] n[p, k] / n[p, .])
          / (n[l, .] + alpha0 + sum_{p} alpha[p])

      over the strict ancestors ``p`` on the path with ``n[p, .] > 0`` (one with no counts
      has no estimate and gets no weight); a denominator of 0 gives ``1 / K``.

    Parameters
    ----------
    smoother
        One of ``MLE``, ``LAPLACE``, ``MESTIMATE``, ``MBRANCH``, ``HGS``.
    m
        ``MESTIMATE``'s weight of the uniform base rate (> 0); ignored by the others.
    counts
        ``(N, Kc)`` float64 class counts of every node, ``Kc >= n_classes``.
    hgs
        ``(N, 4)`` float64 HGS state (:mod:`streamtree.state`); only the ``ALPHA`` column is
        read, and only by ``HGS``.
    theta0
        Log-weight of HGS's uniform pseudo-node; ignored by the others.
    path
        int64 node indices from the root (``path[0]``) down to the predicted node.
    length
        Number of nodes of ``path`` in use (>= 1).
    n_classes
        ``K``.
    out
        float64 buffer of at least ``n_classes`` entries.
    """
    k_count = n_classes
    if k_count <= 0:
        return
    uniform = 1.0 / k_count
    node = path[length - 1]
    if smoother == MLE:
        for j in range(length - 1, -1, -1):
            v = path[j]
            total = 0.0
            for k in range(k_count):
                total += counts[v, k]
            if total > 0:
                for k in range(k_count):
                    out[k] = counts[v, k] / total
                return
        for k in range(k_count):
            out[k] = uniform
    elif smoother == LAPLACE:
        total = 0.0
        for k in range(k_count):
            total += counts[node, k]
        denom = total + k_count
        for k in range(k_count):
            out[k] = (counts[node, k] + 1.0) / denom
    elif smoother == MESTIMATE:
        total = 0.0
        for k in range(k_count):
            total += counts[node, k]
        prior = m * uniform
        denom = total + m
        for k in range(k_count):
            out[k] = (counts[node, k] + prior) / denom
    elif smoother == MBRANCH:
        n_root = 0.0
        for k in range(k_count):
            n_root += counts[0, k]
        root_scale = math.sqrt(n_root)
        for k in range(k_count):
            out[k] = uniform
        for j in range(length):
            v = path[j]
            total = 0.0
            for k in range(k_count):
                total += counts[v, k]
            mj = 1.0 + (1.0 - 1.0 / (length - j)) * root_scale
            denom = total + mj
            for k in range(k_count):
                out[k] = (counts[v, k] + mj * out[k]) / denom
    elif smoother == HGS:
        alpha0 = math.exp(theta0)
        prior = alpha0 / k_count
        total = 0.0
        for k in range(k_count):
            out[k] = counts[node, k] + prior
            total += counts[node, k]
        denom = total + alpha0
        for j in range(length - 1):
            p = path[j]
            total = 0.0
            for k in range(k_count):
                total += counts[p, k]
            if total <= 0:
                continue  # an ancestor with no counts has no estimate: no weight
            a = hgs[p, ALPHA]
            denom += a
            w = a / total
            for k in range(k_count):
                out[k] += w * counts[p, k]
        if denom > 0:
            for k in range(k_count):
                out[k] /= denom
        else:
            for k in range(k_count):
                out[k] = uniform
    else:
        raise ValueError("unknown smoother code")


@njit(cache=True)
def every_node_proba(
    smoother: int,
    m: float,
    counts: np.ndarray,
    hgs: np.ndarray,
    theta0: float,
    order: np.ndarray,
    depth: np.ndarray,
    n_classes: int,
    out: np.ndarray,
) -> None:
    """:func:`path_proba` at every node, written into row ``out[v]`` of node ``v``.

    ``order`` lists the nodes in preorder (a parent before its subtree) and ``depth[v]`` is
    node ``v``'s depth (the root's is 0), so the path of the node being visited is the
    first ``depth[v] + 1`` entries of one buffer kept across nodes: the whole table costs
    ``O(sum of path lengths)`` arithmetic, in one call.
    """
    n = order.shape[0]
    if n == 0:
        return
    path = np.empty(depth.max() + 1, dtype=np.int64)
    for j in range(n):
        v = order[j]
        d = depth[v]
        path[d] = v
        path_proba(smoother, m, counts, hgs, theta0, path, d + 1, n_classes, out[v])
