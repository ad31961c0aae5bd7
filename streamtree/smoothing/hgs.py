"""Hierarchical Gradient Smoothing (HGS): a leaf backed off to all its ancestors at once.

Notation (``docs``: ``shared/docs/hgs-notes.md``): nodes ``0..S-1`` with ``parent[0] = -1``,
class counts ``n[i, k]`` at every node, ``anc(l)`` the strict ancestors of ``l``, one weight
``alpha[p] >= 0`` per internal node, and an optional uniform pseudo-node above the root with
weight ``alpha0`` (``prior_weight``).

Prediction (the paper's Eq. 4, plus the pseudo-node)::

    theta[l, k] = (n[l, k] + alpha0 / K + sum_{p in anc(l)} alpha[p] n[p, k] / n[p, .])
                  / (n[l, .] + alpha0 + sum_{p in anc(l)} alpha[p])

Leave-one-out cost (Eq. 5-6): leaving one example of class ``k`` out of leaf ``l`` leaves
every ancestor too, so with ``th[p, k] = (n[p, k] - 1) / (n[p, .] - 1)``::

    q[l, k] = (n[l, k] - 1 + alpha0 / K + sum_p alpha[p] th[p, k])
              / (n[l, .] - 1 + alpha0 + sum_p alpha[p])
    cost    = (1 / N) sum_{l leaf, k: n[l, k] > 0} n[l, k] (-log2 q[l, k]),   N = sum_l n[l, .]

Gradient (Eq. 7-8), with ``D[l]`` the denominator of ``q`` and ``w = n / (D q)``::

    d cost / d alpha[p] = (1 / (N ln 2)) sum_{l below p} sum_k w[l, k] (q[l, k] - th[p, k])
    d cost / d alpha0   = (1 / (N ln 2)) sum_{l} sum_k w[l, k] (q[l, k] - 1 / K)

Both factor into sums over a node's ancestors (``A``, ``B`` below) and over its subtree
(``U``, ``W``), which :class:`~streamtree.topology.Topology` computes with one cumulative sum
each in preorder: an evaluation is O(S K) with no Python loop over nodes or levels.
"""

from __future__ import annotations

from collections.abc import Sequence

import math
from typing import ClassVar, Literal

import numpy as np

from streamtree.exceptions import ConfigError
from streamtree.smoothing.base import Smoother, State
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["HGS", "LoocvProblem", "loocv", "loocv_topology"]

_LN2 = math.log(2.0)
_LOG_ALPHA_MIN, _LOG_ALPHA_MAX = math.log(1e-4), math.log(1e6)


def loocv(
    parent: IntArray, counts: FloatArray, alpha: FloatArray, prior_weight: float = 0.0
) -> tuple[float, FloatArray, float]:
    """Leave-one-out log-loss of HGS and its gradient.

    Parameters
    ----------
    parent
        ``(S,)`` parent index of every node, ``-1`` for the root (node 0); ``parent[i] < i``.
    counts
        ``(S, K)`` class counts of every node (an internal node counts at least what its
        children count).
    alpha
        ``(S,)`` weight of every node as an ancestor; values on leaves are ignored.
    prior_weight
        Weight ``alpha0`` of a uniform pseudo-node above the root; 0 gives the paper's
        objective exactly.

    Returns
    -------
    cost
        Eq. 6 in bits per example: the sum over leaf examples of ``-log2 q``, divided by the
        number ``N`` of examples at leaves.
    grad_alpha
        ``(S,)`` derivative of the cost w.r.t. every ``alpha``; zero on leaves.
    grad_prior
        Derivative w.r.t. ``prior_weight``.

    Notes
    -----
    Edge cases, each handled on purpose:

    - an ancestor with ``n[p, .] <= 1`` has no leave-one-out estimate: ``th[p] = 0``, its
      weight only adds to the denominator (likewise ``n[p, k] - 1`` is floored at 0);
    - a term whose ``q`` is 0 whatever the weights (a class seen once in the whole tree with
      ``prior_weight = 0``) makes the cost ``inf``; it is constant in every weight, so the
      gradient is that of the remaining, finite terms;
    - with no example at any leaf the cost is 0 and so is the gradient.

    Examples
    --------
    >>> import numpy as np
    >>> parent = np.array([-1, 0, 0])
    >>> counts = np.array([[6., 4.], [5., 1.], [1., 3.]])
    >>> cost, grad, grad0 = loocv(parent, counts, np.ones(3), prior_weight=0.5)
    >>> round(cost, 6), grad[1:].tolist(), bool(grad[0] != 0)
    (1.054067, [0.0, 0.0], True)
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    topology = Topology.from_parent(parent)
    return loocv_topology(topology, np.asarray(counts, dtype=np.float64), alpha, prior_weight)


def loocv_topology(
    topology: Topology, counts: FloatArray, alpha: FloatArray, prior_weight: float = 0.0
) -> tuple[float, FloatArray, float]:
    """:func:`loocv` on a precomputed :class:`~streamtree.topology.Topology`."""
    problem = LoocvProblem(topology, counts)
    cost, grad, grad_prior = problem.evaluate(topology.to_preorder(np.asarray(alpha, np.float64)), prior_weight)
    return cost, topology.from_preorder(grad), grad_prior


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


def _check(name: str, value: object, low: float, high: float = math.inf, integer: bool = False) -> None:
    kind = "an int" if integer else "a float"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not (low <= value <= high):  # type: ignore[operator]
        raise ConfigError(
            f"The '{name}' parameter of HGS must be {kind} in [{low}, {high}]. Got {value!r} instead."
        )


class HGS(Smoother):
    """Hierarchical Gradient Smoothing with weights fitted on the leave-one-out log loss.

    Parameters
    ----------
    mode
        ``"online"`` (default): the weights live in log space (so ``alpha > 0`` always), each
        :meth:`refit` takes at most ``steps`` iRprop- steps warm-started from the previous
        weights and step sizes, and the uniform pseudo-node's weight is learned with them.
        ``"paper"``: Algorithm 1 of the paper: every weight starts at 1, plain gradient
        descent with learning rate ``learning_rate`` until the cost improves by less than
        ``tol`` (at most ``max_iter`` steps), weights projected onto ``alpha >= 0`` (the
        authors' code let them go negative), no pseudo-node.
    steps
        Online mode: the most iRprop- steps one :meth:`refit` takes.
    prior_weight
        Online mode: the initial weight of the uniform pseudo-node above the root.
    learning_rate, tol, max_iter
        Paper mode's gradient descent.

    Notes
    -----
    A node that becomes internal after the last refit starts from its parent's weight (the
    root from 1), the best guess before its own counts say otherwise. iRprop- adapts one step
    size per weight from the gradient's sign only, so it needs no learning rate, is insensitive
    to the scale of the cost, and a few warm-started steps track weights that drift as counts
    grow.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0, 0]))
    >>> counts = np.array([[60., 40.], [50., 10.], [10., 30.]])
    >>> hgs = HGS(steps=50)
    >>> hgs.refit(t, counts)
    >>> p = hgs.node_proba(t, counts)
    >>> bool(np.all(p > 0)), np.allclose(p.sum(axis=1), 1.0)
    (True, True)
    """

    name: ClassVar[str] = "hgs"

    def __init__(
        self,
        mode: Literal["online", "paper"] = "online",
        steps: int = 5,
        prior_weight: float = 1.0,
        learning_rate: float = 0.01,
        tol: float = 1e-4,
        max_iter: int = 10_000,
    ) -> None:
        if mode not in ("online", "paper"):
            raise ConfigError(f"The 'mode' parameter of HGS must be 'online' or 'paper'. Got {mode!r} instead.")
        _check("steps", steps, 1, integer=True)
        _check("prior_weight", prior_weight, 1e-4, 1e6)
        _check("learning_rate", learning_rate, 1e-12)
        _check("tol", tol, 0.0)
        _check("max_iter", max_iter, 1, integer=True)
        self.mode = mode
        self.steps = steps
        self.prior_weight = float(prior_weight)
        self.learning_rate = float(learning_rate)
        self.tol = float(tol)
        self.max_iter = max_iter
        # fitted state: log-weights (online) or weights (paper), per node, and the pseudo-node
        self._theta = np.zeros(0)
        self._theta0 = math.log(self.prior_weight)  # unused in paper mode
        self._step = np.zeros(0)
        self._step0 = 0.1
        self._grad = np.zeros(0)
        self._grad0 = 0.0
        self._sync_alpha()
        self.n_refits = 0
        self.last_cost = math.nan

    # -- parameters ---------------------------------------------------------------------
    @property
    def alpha(self) -> FloatArray:
        """Weight of every node as an ancestor (meaningful on internal nodes)."""
        return self._alpha

    @property
    def alpha0(self) -> float:
        """Weight of the uniform pseudo-node above the root."""
        return self._alpha0

    def _sync_alpha(self) -> None:
        self._alpha = self._theta.copy() if self.mode == "paper" else np.exp(self._theta)
        self._alpha0 = 0.0 if self.mode == "paper" else math.exp(self._theta0)

    def grow(self, parent: IntArray) -> None:
        """Give nodes created since the last call their parent's weight (root: 1)."""
        old = self._theta.shape[0]
        new = parent.shape[0]
        if new <= old:
            return
        self._theta = np.resize(self._theta, new)
        self._step = np.resize(self._step, new)
        self._grad = np.resize(self._grad, new)
        one = 1.0 if self.mode == "paper" else 0.0
        for i in range(old, new):  # only the nodes just created: two per split
            p = parent[i]
            self._theta[i] = self._theta[p] if p >= 0 else one
        self._step[old:] = 0.1
        self._grad[old:] = 0.0
        self._sync_alpha()

    # -- fitting ------------------------------------------------------------------------
    def refit(self, topology: Topology, counts: FloatArray, fit_counts: FloatArray | None = None) -> None:
        self.grow(topology.parent)
        counts = np.asarray(counts if fit_counts is None else fit_counts, dtype=np.float64)
        if counts.shape[1] == 0 or topology.n_nodes == 0:
            return
        if self.mode == "paper":
            self._refit_paper(topology, counts)
        else:
            self._refit_online(topology, counts)
        self._sync_alpha()
        self.n_refits += 1

    def _refit_online(self, topology: Topology, counts: FloatArray) -> None:
        problem = LoocvProblem(topology, counts)
        # the pseudo-node's weight is fitted too: it is the last parameter
        internal = np.append(problem.internal, True)
        theta = np.append(topology.to_preorder(self._theta), self._theta0)
        step = np.append(topology.to_preorder(self._step), self._step0)
        previous = np.append(topology.to_preorder(self._grad), self._grad0)
        for _ in range(self.steps):
            alpha = np.exp(theta)
            cost, grad, grad0 = problem.evaluate(alpha[:-1], float(alpha[-1]))
            self.last_cost = cost
            # chain rule to log space, then iRprop-: grow a step while the gradient keeps its
            # sign, halve it and skip the move when the sign flips
            g = np.where(internal, np.append(grad, grad0) * alpha, 0.0)
            agree = g * previous
            step = np.clip(np.where(agree > 0, step * 1.2, np.where(agree < 0, step * 0.5, step)), 1e-6, 1.0)
            g = np.where(agree < 0, 0.0, g)
            theta = np.clip(theta - np.sign(g) * step, _LOG_ALPHA_MIN, _LOG_ALPHA_MAX)
            previous = g
        self._theta, self._theta0 = topology.from_preorder(theta[:-1]), float(theta[-1])
        self._step, self._step0 = topology.from_preorder(step[:-1]), float(step[-1])
        self._grad, self._grad0 = topology.from_preorder(previous[:-1]), float(previous[-1])

    def _refit_paper(self, topology: Topology, counts: FloatArray) -> None:
        problem = LoocvProblem(topology, counts)
        alpha = np.where(problem.internal, 1.0, 0.0)  # Algorithm 1 starts every weight at 1
        cost, grad, _ = problem.evaluate(alpha, 0.0)
        for _ in range(self.max_iter):
            candidate = np.maximum(alpha - self.learning_rate * grad, 0.0)
            new_cost, new_grad, _ = problem.evaluate(candidate, 0.0)
            improvement = cost - new_cost
            if not improvement > 0:  # also stops on an infinite (constant) cost
                break
            alpha, cost, grad = candidate, new_cost, new_grad
            if improvement < self.tol:
                break
        self._theta = topology.from_preorder(alpha)
        self.last_cost = cost

    # -- prediction ---------------------------------------------------------------------
    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        self.grow(topology.parent)
        counts = np.asarray(counts, dtype=np.float64)
        s, k = counts.shape
        if s == 0 or k == 0:
            return np.zeros((s, k))
        total = counts.sum(axis=1)
        mle = np.zeros((s, k))
        np.divide(counts, total[:, None], out=mle, where=total[:, None] > 0)
        # an ancestor with no counts has no estimate: it gets no weight
        a = np.where(~topology.is_leaf & (total > 0), self.alpha[:s], 0.0)
        alpha0 = self.alpha0
        big_a = topology.ancestor_sum(a) + alpha0
        big_b = topology.ancestor_sum(a[:, None] * mle) + alpha0 / k
        denom = (total + big_a)[:, None]
        out = np.full((s, k), 1.0 / k)  # nothing at the node, nothing weighted above it: uniform
        np.divide(counts + big_b, denom, out=out, where=denom > 0)
        return out

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        # One short path: plain floats cost a fraction of numpy's per-call overhead here.
        self.grow(parent)
        rows = counts.take(path, axis=0).tolist()
        weights = self._alpha.take(path[:-1]).tolist()
        k = len(rows[0])
        alpha0 = self._alpha0
        numer = [v + alpha0 / k for v in rows[-1]]
        denom = sum(rows[-1]) + alpha0
        for a, row in zip(weights, rows):
            total = sum(row)
            if total <= 0:
                continue  # an ancestor with no counts has no estimate: it gets no weight
            denom += a
            w = a / total
            numer = [acc + w * v for acc, v in zip(numer, row)]
        if denom <= 0:
            return np.full(k, 1.0 / k)  # nothing at the node, nothing weighted above it
        return np.array(numer) / denom

    # -- persistence --------------------------------------------------------------------
    def get_state(self) -> State:
        return {
            "theta": self._theta.copy(),
            "step": self._step.copy(),
            "grad": self._grad.copy(),
            "theta0": self._theta0,
            "step0": self._step0,
            "grad0": self._grad0,
            "n_refits": self.n_refits,
        }

    def set_state(self, state: State) -> None:
        self._theta = np.asarray(state["theta"], dtype=np.float64).copy()
        self._step = np.asarray(state["step"], dtype=np.float64).copy()
        self._grad = np.asarray(state["grad"], dtype=np.float64).copy()
        self._theta0 = float(state["theta0"])
        self._step0 = float(state["step0"])
        self._grad0 = float(state["grad0"])
        self.n_refits = int(state["n_refits"])
        self._sync_alpha()

    def __repr__(self) -> str:
        return f"HGS(mode={self.mode!r}, steps={self.steps!r}, prior_weight={self.prior_weight!r})"
