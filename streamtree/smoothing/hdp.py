"""Hierarchical Dirichlet process (HDP) smoothing of a tree's class probabilities.

The model (Petitjean, Buntine, Webb and Zaidi, 2018, applied to trees as in the HGS paper):
every node ``u`` has a class distribution ``theta[u]`` drawn from a Dirichlet process whose
base is its parent's distribution, the root's base being uniform ``H = 1/K``::

    theta[root] ~ Dir(c[root] H),      theta[u] ~ Dir(c[u] theta[parent(u)]),

and the examples that stop at ``u`` (for a batch tree: the examples of a leaf) are draws from
``theta[u]``. With ``theta`` integrated out this is a Chinese restaurant franchise: node ``u``
seats ``m[u, k]`` customers of class ``k`` (its own examples plus one per *table* of each
child) at ``t[u, k]`` tables, and each table sends one customer to the parent. Given the
tables and concentrations, the posterior mean is the paper's Eq. 3, top-down::

    E[theta[u] | t, c] = (m[u] + c[u] E[theta[parent(u)] | t, c]) / (M[u] + c[u]),
    M[u] = sum_k m[u, k].

Sampler
-------
An upward-downward partially collapsed Gibbs sampler (the scheme of Zhou et al.'s gamma belief
networks), each step an exact conditional:

1. *Upward*: the tables of ``u`` given its customers and its parent's current ``theta`` follow
   the Chinese restaurant table (Antoniak) distribution with ``theta[u]`` integrated out::

       t[u, k] ~ CRT(m[u, k], c[u] theta[parent(u), k]),
       CRT(m, a) = sum_{i=0}^{m-1} Bernoulli(a / (a + i)).

   Leaves (whose customers are fixed data) are sampled all at once, then internal nodes one
   depth level at a time from the bottom, each level reading the tables just drawn below it.
   The root's tables use the uniform base. Each of these draws is an exact conditional of the
   model with the node's own ``theta`` (and everything below it) integrated out; ``theta``
   values so marginalised are redrawn in step 3 before anything conditions on them again,
   which is what makes the partially collapsed sweep leave the posterior invariant. Drawing
   all leaves first is the same as drawing them level by level: a leaf's conditional reads
   only its parent's ``theta``, which the upward pass does not change.
2. *Concentrations* given the tables (``theta`` integrated out), with a Gamma(``a``, ``b``)
   prior, by Teh et al.'s (2006) auxiliary variables, one concentration per tying group ``g``
   shared by its nodes ``u`` with ``M[u] > 0``::

       w[u] ~ Beta(c_g + 1, M[u]),   s[u] ~ Bernoulli(M[u] / (M[u] + c_g)),
       c_g ~ Gamma(a + sum_u (T[u] - s[u]),  rate = b - sum_u log w[u]).

3. *Downward*: ``theta`` of internal nodes given the tables, from the root down::

       theta[root] ~ Dir(c[root] H + m[root]),  theta[u] ~ Dir(c[u] theta[parent(u)] + m[u]).

After ``burn_in`` sweeps, each sweep contributes the Rao-Blackwellised estimate above to a
running average. Every step is vectorised over a depth level (or over all leaves), so a sweep
costs O(depth) numpy calls and O(N + S K) arithmetic.

Tying (which nodes share a concentration): ``"single"`` all nodes, ``"level"`` nodes of the
same depth, ``"parent"`` siblings (the root alone), ``"none"`` one per node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, Literal

import numpy as np

from streamtree.exceptions import ConfigError, InputError
from streamtree.smoothing.base import Smoother, State
from streamtree.topology import Topology
from streamtree.typing import FloatArray, IntArray

__all__ = ["HDP", "crt"]

Tying = Literal["single", "level", "parent", "none"]
_TYINGS = ("single", "level", "parent", "none")


def crt(customers: IntArray, strength: FloatArray, rng: np.random.Generator) -> IntArray:
    """Draw table counts from the Chinese restaurant table distribution, elementwise.

    ``CRT(m, a)`` is the number of tables ``m`` customers occupy in a Chinese restaurant with
    concentration ``a``: ``sum_{i=0}^{m-1} Bernoulli(a / (a + i))``. The first customer always
    opens a table, so ``m >= 1`` gives at least one table even when ``a == 0``.

    Parameters
    ----------
    customers
        Non-negative integer array (any shape).
    strength
        Array of the same shape, ``>= 0``.
    rng
        The generator to draw from.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> crt(np.array([0, 1, 5]), np.array([1.0, 0.0, 1e9]), rng).tolist()
    [0, 1, 5]
    """
    m = np.asarray(customers, dtype=np.int64).ravel()
    a = np.asarray(strength, dtype=np.float64).ravel()
    total = int(m.sum())
    if total == 0:
        return np.zeros(np.shape(customers), dtype=np.int64)
    owner = np.repeat(np.arange(m.size), m)
    first = np.cumsum(m) - m
    seat = np.arange(total) - first[owner]  # i = 0 .. m-1 within each cell
    return _crt_from_seats(owner, seat, a, m.size, rng).reshape(np.shape(customers))


def _crt_from_seats(owner: IntArray, seat: IntArray, a: FloatArray, n_cells: int, rng: np.random.Generator) -> IntArray:
    """CRT draws given each customer's cell (``owner``) and arrival index (``seat``)."""
    strength = a[owner]
    # u < a / (a + i) without the division (no 0/0 when a = 0); the first customer always opens
    opened = (rng.random(owner.size) * (strength + seat) < strength) | (seat == 0)
    return np.bincount(owner, weights=opened, minlength=n_cells).astype(np.int64)


def _dirichlet_rows(alpha: FloatArray, rng: np.random.Generator) -> FloatArray:
    """One Dirichlet draw per row, by normalised Gamma draws.

    A row whose parameters are all tiny (an internal node with no customers and a small
    concentration) can draw all-zero Gammas; it then falls back to its mean, ``alpha`` over its
    sum: the draw is concentrated there anyway and this avoids 0 / 0.
    """
    g: FloatArray = rng.standard_gamma(alpha)
    total = g.sum(axis=1, keepdims=True)
    if not np.all(total > 0):
        bad = total[:, 0] <= 0
        g[bad] = alpha[bad]
        total = g.sum(axis=1, keepdims=True)
    out: FloatArray = g / total
    return out


def _check_number(name: str, value: object, low: float, *, integer: bool = False, strict: bool = True) -> None:
    kind = "an int" if integer else "a float"
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.number))
    ok = ok and not isinstance(value, bool) and math.isfinite(float(value))  # type: ignore[arg-type]
    ok = ok and (float(value) > low if strict else float(value) >= low)  # type: ignore[arg-type]
    if not ok:
        bound = ">" if strict else ">="
        raise ConfigError(f"The {name!r} parameter of HDP must be {kind} {bound} {low:g}. Got {value!r} instead.")


MAX_CUSTOMERS = 10_000_000
"""The most customers (examples, rounded) :meth:`HDP.refit` seats: each sweep draws one
Bernoulli per customer, so its time and memory grow linearly with them."""


class _Plan:
    """Index arrays of one tree, computed once per refit and reused by every sweep."""

    def __init__(self, topology: Topology, own: IntArray, tying: Tying) -> None:
        parent = topology.parent
        s = topology.n_nodes
        self.parent = parent
        self.is_leaf = topology.is_leaf
        self.leaves = np.flatnonzero(self.is_leaf & (np.arange(s) > 0))
        self.leaf_parent = parent[self.leaves]
        # the leaves' customers never change: their ragged seat indices are built once
        m_leaf = own[self.leaves].ravel()
        self.leaf_owner = np.repeat(np.arange(m_leaf.size), m_leaf)
        self.leaf_seat = np.arange(self.leaf_owner.size) - (np.cumsum(m_leaf) - m_leaf)[self.leaf_owner]
        # per depth level d (deepest first) with internal nodes: those nodes (grouped by
        # parent order), their parents, and their children sorted by parent with segment
        # starts, so a level's customers are one reduceat over its children's tables
        self.up: list[tuple[IntArray, IntArray, IntArray, IntArray]] = []
        levels = topology.levels
        for d in range(len(levels) - 2, -1, -1):
            children = levels[d + 1]
            ordered = children[np.argsort(parent[children], kind="stable")]
            par = parent[ordered]
            start = np.flatnonzero(np.r_[True, par[1:] != par[:-1]])
            nodes = par[start]
            self.up.append((nodes, parent[nodes], ordered, start))
        self.down = self.up[::-1]  # shallowest first; the root's entry (if internal) is first
        self.root_is_leaf = bool(self.is_leaf[0])
        if tying == "single":
            group = np.zeros(s, dtype=np.int64)
        elif tying == "level":
            group = topology.depth.astype(np.int64)
        elif tying == "parent":
            group = parent + 1  # the root (parent -1) is group 0, siblings share parent + 1
        else:
            group = np.arange(s, dtype=np.int64)
        _, self.group = np.unique(group, return_inverse=True)
        self.n_groups = int(self.group.max()) + 1 if s else 0


class HDP(Smoother):
    """Hierarchical Dirichlet process smoothing with Gibbs-sampled tables and concentrations.

    Parameters
    ----------
    iterations
        Gibbs sweeps in total (the HGS paper used 1000).
    burn_in
        Sweeps discarded before averaging; ``None`` for half of ``iterations``.
    tying
        Which nodes share a concentration: ``"single"`` (the paper's setting), ``"level"``,
        ``"parent"`` or ``"none"``.
    concentration
        Initial concentration of every node; with ``sample_concentration=False`` it is kept.
    sample_concentration
        Whether to Gibbs-sample the concentrations (the paper does).
    prior_shape, prior_rate
        The Gamma prior of each concentration (mean ``prior_shape / prior_rate``).
    seed
        Seed of the ``numpy`` generator each :meth:`refit` creates: the same counts and
        parameters give the same probabilities, bit for bit.

    Notes
    -----
    Counts are numbers of examples; fractional counts (weighted examples) are rounded, since
    the Chinese restaurant representation needs whole customers. An internal node's own
    customers are its counts minus its children's (0 for a tree whose examples all reach a
    leaf). :meth:`node_proba` returns, for every node ``u`` treated as a leaf holding all of
    its counts ``n[u]``, the average over retained sweeps of
    ``(n[u] + c[u] E[theta[parent(u)] | t, c]) / (n[u, .] + c[u])`` (the root: base ``1/K``);
    for the counts of the last :meth:`refit` this is the posterior mean. For other counts (an
    online tree between refits) it uses the posterior means of ``c[u]`` and of the parent's
    estimate, and nodes created since the refit take their parent's.

    References
    ----------
    F. Petitjean, W. Buntine, G. I. Webb, N. Zaidi. Accurate parameter estimation for Bayesian
    network classifiers using hierarchical Dirichlet processes. Machine Learning 107, 2018.
    Y. W. Teh, M. I. Jordan, M. J. Beal, D. M. Blei. Hierarchical Dirichlet processes. JASA
    101, 2006 (appendix A: concentration sampling).
    M. Zhou, Y. Cong, B. Chen. Augmentable gamma belief networks. JMLR 17, 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.topology import Topology
    >>> t = Topology.from_parent(np.array([-1, 0, 0]))
    >>> counts = np.array([[12., 8.], [11., 1.], [1., 7.]])
    >>> hdp = HDP(iterations=200, seed=1)
    >>> hdp.refit(t, counts)
    >>> p = hdp.node_proba(t, counts)
    >>> bool(p[1, 0] > 0.8 and p[2, 1] > 0.7), np.allclose(p.sum(axis=1), 1.0)
    (True, True)
    """

    name: ClassVar[str] = "hdp"

    def __init__(
        self,
        iterations: int = 1000,
        burn_in: int | None = None,
        tying: Tying = "single",
        concentration: float = 1.0,
        sample_concentration: bool = True,
        prior_shape: float = 1.0,
        prior_rate: float = 1.0,
        seed: int = 0,
    ) -> None:
        _check_number("iterations", iterations, 1, integer=True, strict=False)
        if burn_in is not None:
            _check_number("burn_in", burn_in, 0, integer=True, strict=False)
            if burn_in >= iterations:
                raise ConfigError(
                    f"The 'burn_in' parameter of HDP must be smaller than iterations ({iterations}). "
                    f"Got {burn_in!r} instead."
                )
        if tying not in _TYINGS:
            raise ConfigError(
                f"The 'tying' parameter of HDP must be one of {', '.join(map(repr, _TYINGS))}. Got {tying!r} instead."
            )
        _check_number("concentration", concentration, 0.0)
        if not isinstance(sample_concentration, bool):
            raise ConfigError(
                f"The 'sample_concentration' parameter of HDP must be a bool. Got {sample_concentration!r} instead."
            )
        _check_number("prior_shape", prior_shape, 0.0)
        _check_number("prior_rate", prior_rate, 0.0)
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"The 'seed' parameter of HDP must be an int >= 0. Got {seed!r} instead.")
        self.iterations = int(iterations)
        self.burn_in = burn_in
        self.tying: Tying = tying
        self.concentration = float(concentration)
        self.sample_concentration = sample_concentration
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)
        self.seed = int(seed)
        # fitted state
        self._proba = np.zeros((0, 0))  # posterior-mean probabilities for the fitted counts
        self._counts = np.zeros((0, 0))  # the counts they were fitted on
        self._base = np.zeros((0, 0))  # posterior mean of E[theta[parent(u)] | t, c] (root: 1/K)
        self._conc = np.zeros(0)  # posterior mean concentration of every node

    @property
    def concentration_(self) -> FloatArray:
        """Posterior mean concentration of every node (after :meth:`refit`)."""
        return self._conc

    # -- fitting ------------------------------------------------------------------------
    def refit(self, topology: Topology, counts: FloatArray, fit_counts: FloatArray | None = None) -> None:
        counts = np.asarray(counts, dtype=np.float64)
        data = counts if fit_counts is None else np.asarray(fit_counts, dtype=np.float64)
        s = topology.n_nodes
        if counts.ndim != 2 or counts.shape[0] != s or data.shape != counts.shape:
            raise InputError(f"counts must have shape (n_nodes={s}, n_classes); got {counts.shape} and {data.shape}")
        if not (np.all(np.isfinite(data)) and np.all(data >= 0)):
            raise InputError("counts must be finite and >= 0")
        k = counts.shape[1]
        if s == 0 or k == 0:
            self._proba, self._counts = np.zeros((s, k)), counts.copy()
            self._base, self._conc = np.zeros((s, k)), np.zeros(s)
            return
        rng = np.random.default_rng(self.seed)
        whole = np.rint(data)
        child_sum = np.zeros_like(whole)
        np.add.at(child_sum, topology.parent[1:], whole[1:])
        own_f = np.maximum(whole - child_sum, 0)
        if own_f.sum() > MAX_CUSTOMERS:  # checked in floats: past 2**63 the integers wrap
            raise InputError(
                f"HDP seats one customer per unit of count, and its time and memory grow with them: "
                f"the counts seat {own_f.sum():.4g} customers, over the {MAX_CUSTOMERS:,} it takes. "
                f"Scale the counts (or sample weights) down, or use another smoother.",
                field="counts",
            )
        own = own_f.astype(np.int64)
        plan = _Plan(topology, own, self.tying)
        burn_in = self.iterations // 2 if self.burn_in is None else self.burn_in
        kept = self.iterations - burn_in

        conc_g = np.full(plan.n_groups, self.concentration)
        tables = np.minimum(own, 1)
        custom = own.copy()
        theta = np.full((s, k), 1.0 / k)
        uniform = np.full((1, k), 1.0 / k)
        # start: one table per class present, bottom-up; then theta from those tables
        for nodes, _, ordered, start in plan.up:
            custom[nodes] = own[nodes] + np.add.reduceat(tables[ordered], start, axis=0)
            tables[nodes] = np.minimum(custom[nodes], 1)
        conc = conc_g[plan.group]
        self._downward(plan, custom, conc, theta, rng)

        total = counts.sum(axis=1)
        acc_proba = np.zeros((s, k))
        acc_base = np.zeros((s, k))
        acc_conc = np.zeros(s)
        rb = np.empty((s, k))
        base_all = np.empty((s, k))
        base_all[0] = uniform[0]
        leaf_seats = (plan.leaf_owner, plan.leaf_seat, plan.leaves.size * k)
        for sweep in range(self.iterations):
            # 1. upward: tables of every leaf at once, then internal levels bottom-up
            a = conc[plan.leaves, None] * theta[plan.leaf_parent]
            tables[plan.leaves] = _crt_from_seats(leaf_seats[0], leaf_seats[1], a.ravel(), leaf_seats[2], rng).reshape(
                a.shape
            )
            for nodes, par, ordered, start in plan.up:
                m = own[nodes] + np.add.reduceat(tables[ordered], start, axis=0)
                custom[nodes] = m
                base = theta[par] if par[0] >= 0 else uniform
                tables[nodes] = crt(m, conc[nodes, None] * base, rng)
            if plan.root_is_leaf:
                tables[0] = crt(custom[0], conc[0] * uniform[0], rng)
            # 2. concentrations given the tables
            if self.sample_concentration:
                conc_g = self._sample_concentrations(plan, custom, tables, conc_g, rng)
                conc = conc_g[plan.group]
            # 3. downward: theta of internal nodes given the tables
            self._downward(plan, custom, conc, theta, rng)
            if sweep < burn_in:
                continue
            # Rao-Blackwellised E[theta | t, c] of internal nodes, top-down
            rb[0] = (custom[0] + conc[0] * uniform[0]) / (custom[0].sum() + conc[0])
            for nodes, par, _, _ in plan.down:
                if par[0] >= 0:
                    m = custom[nodes]
                    c = conc[nodes, None]
                    rb[nodes] = (m + c * rb[par]) / (m.sum(axis=1, keepdims=True) + c)
            base_all[1:] = rb[plan.parent[1:]]
            acc_base += base_all
            acc_conc += conc
            acc_proba += (counts + conc[:, None] * base_all) / (total + conc)[:, None]
        self._proba = acc_proba / kept
        self._base = acc_base / kept
        self._conc = acc_conc / kept
        self._counts = counts.copy()

    @staticmethod
    def _downward(plan: _Plan, custom: IntArray, conc: FloatArray, theta: FloatArray, rng: np.random.Generator) -> None:
        k = theta.shape[1]
        theta[0] = _dirichlet_rows((conc[0] / k + custom[0])[None, :], rng)[0]
        for nodes, par, _, _ in plan.down:
            if par[0] >= 0:
                theta[nodes] = _dirichlet_rows(conc[nodes, None] * theta[par] + custom[nodes], rng)

    def _sample_concentrations(
        self, plan: _Plan, custom: IntArray, tables: IntArray, conc_g: FloatArray, rng: np.random.Generator
    ) -> FloatArray:
        big_m = custom.sum(axis=1)
        big_t = tables.sum(axis=1)
        used = np.flatnonzero(big_m > 0)
        g = plan.group[used]
        c = conc_g[g]
        m_used = big_m[used].astype(np.float64)
        w = rng.beta(c + 1.0, m_used)
        s = rng.random(used.size) < m_used / (m_used + c)
        shape = self.prior_shape + np.bincount(g, weights=big_t[used] - s, minlength=plan.n_groups)
        rate = self.prior_rate - np.bincount(g, weights=np.log(w), minlength=plan.n_groups)
        return rng.gamma(shape) / rate

    # -- prediction ---------------------------------------------------------------------
    def _plug_in(self, topology: Topology, counts: FloatArray) -> FloatArray:
        s, k = counts.shape
        fitted = min(self._conc.shape[0], s)
        conc = np.empty(s)
        base = np.empty((s, k))
        conc[:fitted] = self._conc[:fitted]
        base[:fitted] = self._base[:fitted]
        if fitted == 0:
            conc[0], base[0] = self.concentration, 1.0 / k
        total = counts.sum(axis=1)
        out = np.empty((s, k))
        start = max(fitted, 1)
        out[:start] = (counts[:start] + conc[:start, None] * base[:start]) / (total[:start] + conc[:start])[:, None]
        if start < s:  # nodes created since the refit: smoothed toward their parent's estimate
            parent = topology.parent
            for nodes in topology.levels[1:]:
                new = nodes[nodes >= start]
                if new.size:
                    conc[new] = conc[parent[new]]
                    base[new] = out[parent[new]]
                    out[new] = (counts[new] + conc[new, None] * base[new]) / (total[new] + conc[new])[:, None]
        return out

    def node_proba(self, topology: Topology, counts: FloatArray) -> FloatArray:
        counts = np.asarray(counts, dtype=np.float64)
        s, k = counts.shape
        if s == 0 or k == 0:
            return np.zeros((s, k))
        if self._proba.shape == counts.shape and np.array_equal(self._counts, counts):
            return self._proba.copy()
        if self._conc.shape[0] == 0 or self._base.shape[1] != k:
            self.refit(topology, counts)
            return self._proba.copy()
        return self._plug_in(topology, counts)

    def path_proba(self, parent: IntArray, counts: FloatArray, path: Sequence[int] | IntArray) -> FloatArray:
        node = int(path[-1])
        if (
            node < self._proba.shape[0]
            and self._proba.shape[1] == counts.shape[1]
            and np.array_equal(self._counts[node], counts[node])
        ):
            row: FloatArray = self._proba[node].copy()
            return row
        return super().path_proba(parent, counts, path)

    # -- persistence --------------------------------------------------------------------
    def get_state(self) -> State:
        return {
            "proba": self._proba.copy(),
            "counts": self._counts.copy(),
            "base": self._base.copy(),
            "concentration": self._conc.copy(),
        }

    def set_state(self, state: State) -> None:
        self._proba = np.asarray(state["proba"], dtype=np.float64).copy()
        self._counts = np.asarray(state["counts"], dtype=np.float64).copy()
        self._base = np.asarray(state["base"], dtype=np.float64).copy()
        self._conc = np.asarray(state["concentration"], dtype=np.float64).copy()

    def __repr__(self) -> str:
        return (
            f"HDP(iterations={self.iterations!r}, burn_in={self.burn_in!r}, tying={self.tying!r}, "
            f"concentration={self.concentration!r}, sample_concentration={self.sample_concentration!r}, "
            f"prior_shape={self.prior_shape!r}, prior_rate={self.prior_rate!r}, seed={self.seed!r})"
        )
