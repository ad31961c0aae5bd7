"""Slow numpy oracle for the HGS kernels (:mod:`streamtree.kernels.hgs`).

This is the numpy implementation streamtree used before the compiled kernels: the LOOCV
objective evaluated with preorder cumulative sums over a :class:`~streamtree.topology.Topology`
(:class:`LoocvProblem`), the online iRprop- and paper fitting loops, and the batch
probabilities. It lives only here, as the reference the kernels are tested against.
"""

from __future__ import annotations

import math

import numpy as np

from streamtree.topology import Topology
from streamtree.typing import FloatArray

_LN2 = math.log(2.0)
_LOG_ALPHA_MIN, _LOG_ALPHA_MAX = math.log(1e-4), math.log(1e6)


class LoocvProblem:
    """Everything in the LOOCV objective that does not depend on the weights, in preorder.

    Built once per refit; :meth:`evaluate` then costs a handful of O(S K) array passes.
    Weights and gradients are in preorder space (:meth:`Topology.to_preorder`).
    """

    def __init__(self, topology: Topology, counts: FloatArray) -> None:
        self.topology = topology
        # classes by rows, nodes in preorder along each row: (K, S)
        counts = topology.to_preorder(np.asarray(counts, dtype=np.float64)).T.copy()
        k, s = counts.shape
        self.k = k
        self.internal = ~topology.to_preorder(topology.is_leaf)
        total = counts.sum(axis=0)
        th = np.zeros((k, s))
        has_loo = total > 1  # an ancestor with one example has no leave-one-out estimate: 0
        np.divide(np.maximum(counts - 1.0, 0.0), total - 1.0, out=th, where=has_loo)
        self.th = th
        leaf = ~self.internal
        self.n_leaf = float(total[leaf].sum())
        self.nl = counts * leaf
        self.present = self.nl > 0
        self.loo_total = np.maximum(total - 1.0, 0.0)
        self.loo_counts = np.maximum(self.nl - 1.0, 0.0)
        self._buffer = np.empty((k + 1, s))

    def evaluate(self, alpha: FloatArray, prior_weight: float) -> tuple[float, FloatArray, float]:
        """Cost, gradient w.r.t. ``alpha`` (preorder) and w.r.t. ``prior_weight``."""
        topology, k = self.topology, self.k
        s = alpha.shape[0]
        if s == 0 or k == 0 or self.n_leaf <= 0:
            return 0.0, np.zeros(s), 0.0
        a = np.where(self.internal, alpha, 0.0)
        # one ancestor pass for A (row 0) and B (rows 1..K)
        buf = self._buffer
        buf[0] = a
        np.multiply(self.th, a, out=buf[1:])
        sums = topology.preorder_ancestor_sum_rows(buf)
        denom = self.loo_total + sums[0] + prior_weight
        with np.errstate(divide="ignore", invalid="ignore"):
            q = (self.loo_counts + sums[1:] + prior_weight / k) / denom
            log_q = np.log2(q, where=self.present, out=np.zeros((k, s)))
        if not np.isfinite(log_q).all() or (q[self.present] <= 0).any():
            finite = np.isfinite(log_q) & (q > 0)
            cost = math.inf  # a term constant in every weight: see loocv's Notes
        else:
            finite = self.present
            cost = float(-np.vdot(self.nl, log_q) / self.n_leaf)
        w = np.zeros((k, s))
        np.divide(self.nl, denom * q, out=w, where=self.present & finite)
        # one subtree pass for U (row 0) and W (rows 1..K)
        np.multiply(w, q, out=buf[1:])
        buf[0] = buf[1:].sum(axis=0)
        buf[1:] = w
        sub = topology.preorder_subtree_sum_rows(buf)
        scale = 1.0 / (self.n_leaf * _LN2)
        grad = (sub[0] - (self.th * sub[1:]).sum(axis=0)) * scale
        grad[~self.internal] = 0.0
        grad_prior = float((sub[0, 0] - sub[1:, 0].sum() / k) * scale)
        return cost, grad, grad_prior


def loocv(
    parent: np.ndarray, counts: FloatArray, alpha: FloatArray, prior_weight: float
) -> tuple[float, FloatArray, float]:
    """Cost, gradient per node (node order) and gradient w.r.t. ``prior_weight``."""
    topology = Topology.from_parent(parent)
    problem = LoocvProblem(topology, counts)
    cost, grad, grad0 = problem.evaluate(topology.to_preorder(np.asarray(alpha, np.float64)), prior_weight)
    return cost, topology.from_preorder(grad), grad0


def refit_online(
    parent: np.ndarray,
    counts: FloatArray,
    theta: FloatArray,
    step: FloatArray,
    grad: FloatArray,
    theta0: float,
    step0: float,
    grad0: float,
    steps: int,
) -> tuple[FloatArray, FloatArray, FloatArray, float, float, float, float]:
    """``steps`` iRprop- steps on log-weights: new (theta, step, grad, theta0, step0, grad0, cost)."""
    topology = Topology.from_parent(parent)
    problem = LoocvProblem(topology, counts)
    internal = np.append(problem.internal, True)  # the pseudo-node is the last parameter
    th = np.append(topology.to_preorder(theta), theta0)
    st = np.append(topology.to_preorder(step), step0)
    previous = np.append(topology.to_preorder(grad), grad0)
    cost = math.nan
    for _ in range(steps):
        alpha = np.exp(th)
        cost, g_alpha, g0 = problem.evaluate(alpha[:-1], float(alpha[-1]))
        g = np.where(internal, np.append(g_alpha, g0) * alpha, 0.0)
        agree = g * previous
        st = np.clip(np.where(agree > 0, st * 1.2, np.where(agree < 0, st * 0.5, st)), 1e-6, 1.0)
        g = np.where(agree < 0, 0.0, g)
        th = np.clip(th - np.sign(g) * st, _LOG_ALPHA_MIN, _LOG_ALPHA_MAX)
        previous = g
    return (
        topology.from_preorder(th[:-1]),
        topology.from_preorder(st[:-1]),
        topology.from_preorder(previous[:-1]),
        float(th[-1]),
        float(st[-1]),
        float(previous[-1]),
        cost,
    )


def refit_paper(
    parent: np.ndarray, counts: FloatArray, learning_rate: float, tol: float, max_iter: int
) -> tuple[FloatArray, float]:
    """Algorithm 1: (weights per node, cost at them)."""
    topology = Topology.from_parent(parent)
    problem = LoocvProblem(topology, counts)
    alpha = np.where(problem.internal, 1.0, 0.0)
    cost, grad, _ = problem.evaluate(alpha, 0.0)
    for _ in range(max_iter):
        candidate = np.maximum(alpha - learning_rate * grad, 0.0)
        new_cost, new_grad, _ = problem.evaluate(candidate, 0.0)
        improvement = cost - new_cost
        if not improvement > 0:
            break
        alpha, cost, grad = candidate, new_cost, new_grad
        if improvement < tol:
            break
    return topology.from_preorder(alpha), cost


def node_proba(parent: np.ndarray, counts: FloatArray, alpha: FloatArray, alpha0: float) -> FloatArray:
    """HGS probabilities at every node, with ancestor sums over a Topology."""
    topology = Topology.from_parent(parent)
    counts = np.asarray(counts, dtype=np.float64)
    s, k = counts.shape
    if s == 0 or k == 0:
        return np.zeros((s, k))
    total = counts.sum(axis=1)
    mle = np.zeros((s, k))
    np.divide(counts, total[:, None], out=mle, where=total[:, None] > 0)
    a = np.where(~topology.is_leaf & (total > 0), np.asarray(alpha, np.float64)[:s], 0.0)
    big_a = topology.ancestor_sum(a) + alpha0
    big_b = topology.ancestor_sum(a[:, None] * mle) + alpha0 / k
    denom = (total + big_a)[:, None]
    out = np.full((s, k), 1.0 / k)
    np.divide(counts + big_b, denom, out=out, where=denom > 0)
    return out
