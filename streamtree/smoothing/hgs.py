"""Hierarchical Gradient Smoothing (HGS): a leaf backed off to all its ancestors at once.

Notation (``docs/library/hgs.md``): nodes ``0..S-1`` with ``parent[0] = -1``,
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

Both factor into sums over a node's ancestors (``A``, ``B``) and over its subtree (``U``,
``W``), which the compiled kernels of :mod:`streamtree.kernels.hgs` compute with one forward
and one backward pass over the node index (every parent precedes its children): an
evaluation is O(S K).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from streamtree.exceptions import ConfigError
from streamtree.kernels import hgs as kernels
from streamtree.kernels import smoothing as kernel_codes
from streamtree.smoothing.base import Smoother, State
from streamtree.state import ALPHA, F_THETA0, GRAD, HGS_COLUMNS, M_NODES, M_REFITS, STEP, THETA
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["HGS", "loocv", "loocv_topology"]


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
    parent, internal, counts = _kernel_inputs(topology, counts)
    n = topology.n_nodes
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim != 1 or alpha.shape[0] < n:
        raise ValueError(f"alpha must have a weight per node: shape ({n},), got {alpha.shape}")
    alpha = np.ascontiguousarray(alpha[:n])
    grad = np.zeros(n)
    cost, grad_prior = kernels.loocv(parent, internal, counts, n, counts.shape[1], alpha, float(prior_weight), grad)
    return float(cost), grad, float(grad_prior)


def _kernel_inputs(topology: Topology, counts: FloatArray) -> tuple[IntArray, np.ndarray, FloatArray]:
    """The kernels' view of a tree: contiguous int64 ``parent``, bool ``internal`` and float64
    ``(S, K)`` counts (the kernels do not check bounds: the shapes are checked here)."""
    n = topology.n_nodes
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] < n:
        raise ValueError(f"counts must have a row per node: ({n}, K), got {counts.shape}")
    counts = np.ascontiguousarray(counts[:n])
    parent = np.ascontiguousarray(topology.parent, dtype=np.int64)
    return parent, np.ascontiguousarray(~topology.is_leaf), counts


def _check(name: str, value: object, low: float, high: float = math.inf, integer: bool = False) -> None:
    kind = "an int" if integer else "a float"
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not (low <= value <= high):  # type: ignore[operator]
        raise ConfigError(f"The '{name}' parameter of HGS must be {kind} in [{low}, {high}]. Got {value!r} instead.")


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
    code: ClassVar[int] = kernel_codes.HGS

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
        # fitted state, the layout of streamtree.state: per node hgs[i, THETA | STEP | GRAD | ALPHA]
        # (log-weight in online mode, weight in paper mode; iRprop step; last gradient; the
        # online weight exp(theta)), and the pseudo-node's theta0, step0, grad0 (unused in
        # paper mode)
        self._hgs = np.zeros((0, HGS_COLUMNS))
        self._scal = np.array([math.log(self.prior_weight), 0.1, 0.0])
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
        self._alpha = self._hgs[:, THETA if self.mode == "paper" else ALPHA].copy()
        self._alpha0 = 0.0 if self.mode == "paper" else math.exp(self._scal[0])

    def grow(self, parent: IntArray) -> None:
        """Give nodes created since the last call their parent's weight (root: 1)."""
        old = self._hgs.shape[0]
        new = parent.shape[0]
        if new <= old:
            return
        hgs = np.zeros((new, HGS_COLUMNS))
        hgs[:old] = self._hgs
        hgs[old:, STEP] = 0.1
        one = 1.0 if self.mode == "paper" else 0.0
        for i in range(old, new):  # only the nodes just created: two per split
            p = parent[i]
            hgs[i, THETA] = hgs[p, THETA] if p >= 0 else one
            hgs[i, ALPHA] = hgs[p, ALPHA] if p >= 0 else 1.0
        self._hgs = hgs
        self._sync_alpha()

    # -- fitting ------------------------------------------------------------------------
    def refit(self, topology: Topology, counts: FloatArray, fit_counts: FloatArray | None = None) -> None:
        self.grow(topology.parent)
        parent, internal, counts = _kernel_inputs(topology, counts if fit_counts is None else fit_counts)
        n, k = topology.n_nodes, counts.shape[1]
        if k == 0 or n == 0:
            return
        if self.mode == "paper":
            # Algorithm 1 from alpha = 1, no pseudo-node
            alpha = np.zeros(n)
            self.last_cost = float(
                kernels.refit_paper(parent, internal, counts, n, k, self.learning_rate, self.tol, self.max_iter, alpha)
            )
            self._hgs[:n, THETA] = alpha
        else:
            # iRprop- on the log-weights, warm-started; the pseudo-node's weight is fitted too
            self.last_cost = float(
                kernels.refit_online(parent, internal, counts, n, k, self._hgs, self._scal, self.steps)
            )
        self._sync_alpha()
        self.n_refits += 1

    # -- prediction ---------------------------------------------------------------------
    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        self.grow(topology.parent)
        parent, internal, counts = _kernel_inputs(topology, counts)
        s, k = counts.shape
        out = np.zeros((s, k))
        if s == 0 or k == 0:
            return out
        kernels.node_proba(parent, internal, counts, s, k, self._alpha, float(self._alpha0), out)
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

    # -- the online tree's arrays (streamtree.state) ---------------------------------------
    def weights(self, tree: Any) -> tuple[FloatArray | None, float | None]:
        n = int(tree.meta[M_NODES])
        if self.mode == "paper":
            return tree.hgs[:n, THETA].copy(), 0.0
        return tree.hgs[:n, ALPHA].copy(), math.exp(tree.meta_f[F_THETA0])

    def summary(self, tree: Any) -> dict[str, Any] | None:
        prior = 0.0 if self.mode == "paper" else math.exp(tree.meta_f[F_THETA0])
        return {"prior_weight": prior, "n_refits": int(tree.meta[M_REFITS])}

    # -- persistence --------------------------------------------------------------------
    def get_state(self) -> State:
        return {
            "theta": self._hgs[:, THETA].copy(),
            "step": self._hgs[:, STEP].copy(),
            "grad": self._hgs[:, GRAD].copy(),
            "theta0": float(self._scal[0]),
            "step0": float(self._scal[1]),
            "grad0": float(self._scal[2]),
            "n_refits": self.n_refits,
        }

    def set_state(self, state: State) -> None:
        columns = [np.asarray(state[key], dtype=np.float64).reshape(-1) for key in ("theta", "step", "grad")]
        self._hgs = np.zeros((columns[0].shape[0], HGS_COLUMNS))
        self._hgs[:, [THETA, STEP, GRAD]] = np.stack(columns, axis=1)
        kernels.sync_alpha(self._hgs, self._hgs.shape[0])
        self._scal = np.array([float(state["theta0"]), float(state["step0"]), float(state["grad0"])])
        self.n_refits = int(state["n_refits"])
        self._sync_alpha()

    def __repr__(self) -> str:
        return f"HGS(mode={self.mode!r}, steps={self.steps!r}, prior_weight={self.prior_weight!r})"
