"""A tree's whole state as plain data: a few flat, growable numpy arrays.

Nothing else holds a node. The compiled kernels (:mod:`streamtree.kernels`) are pure
functions of these arrays; :class:`~streamtree.tree.ProbabilityTree` is a thin wrapper that
orchestrates them, and persistence writes and reads exactly these arrays.

Capacities (the first axis of the node and slot arrays, and the class, column and value axes)
grow by doubling in Python between kernel calls; the logical sizes live in ``meta``. Every
array is float64 or int64, C-contiguous, so one compiled specialisation serves every tree.

Layout
------
Nodes (capacity ``N``), nodes appended as they are created, so ``parent[i] < i``:

- ``node[i, PARENT | LEFT | RIGHT]``: -1 where none;
- ``node[i, KIND]``: ``LEAF`` (-1), ``NUMERIC`` (0: ``x[col] <= thr`` goes left) or
  ``NOMINAL`` (1: ``code[col] == thr`` goes left);
- ``node[i, COL]``, ``node[i, DEPTH]`` (root 0), ``node[i, SLOT]`` (-1: no split statistics);
- ``thr[i]``;
- ``counts[i, k]``: class counts of every example that passed through node ``i``;
- ``inherited[i, k]``: the part of ``counts`` a new leaf started with (``leaf_init="inherit"``);
- ``hgs[i, THETA | STEP | GRAD | ALPHA]``: HGS log-weight of node ``i`` as an ancestor, its
  iRprop step size and last gradient, and the weight itself, ``exp(theta)`` as the kernels
  compute it, kept next to it so that a prediction reads a weight per ancestor instead of
  computing an exponential (unused by the other smoothers).

Leaf split statistics (capacity ``M`` slots; one per growing leaf):

- ``num_stats[s, f, k, N_ | S_ | Q_]``: count, sum and sum of squares of ``x - shift[f]``;
- ``num_range[s, f, MIN | MAX]``: raw minimum and maximum (``+inf``/``-inf`` when empty);
- ``nom_stats[s, c, v, k]``: counts per nominal value code;
- ``slot_seen[s, SEEN | LAST_ATTEMPT | BEHIND]``: the leaf's examples seen, their number at its
  last split attempt, and the forgetting passes (``half_life``) its statistics have not had yet
  (:func:`~streamtree.kernels.refit.catch_up`);
- ``free_slots[:meta[N_FREE]]``: a stack of free slots (the lowest on top).

The naive-Bayes factor's statistics use the same layout with one slot (``nb_num``,
``nb_range``, ``nb_nom``, ``nb_seen``); its parameters are ``nb_mean``, ``nb_inv2var``,
``nb_const`` (per numeric column and class) and ``nb_table[c, v, k]`` (log value
probabilities, last row: unseen values; NaN rows: a column with no statistics); the scored
examples that fit ``gamma`` are ``nb_a``, ``nb_b`` (``BUFFER`` rows) and ``nb_y``.

The linear component (:mod:`streamtree.kernels.linear`; empty arrays without it): the
regression's weights ``lr_w[k, f]`` and intercepts ``lr_bias[k] = (w, G)``, the running scales and
AdaGrad accumulators ``lr_scale[f] = (n, mean, m2, G)``, and the pool's
prequential window ``mix_a``, ``mix_b`` (``WINDOW`` rows), ``mix_y`` and ``mix_u``.

``meta`` (int64) and ``meta_f`` (float64) hold the logical sizes, counters and fitted scalars
(``M_*`` and ``F_*`` indexes). ``meta[M_EXAMPLES]`` counts the examples *this* tree learned: it
schedules its refits and naive-Bayes samples. ``meta[M_STOPPED]`` is 1 once growth stopped,
and ``meta[M_OVER_BUDGET]`` 1 when it stopped for the memory budget (``max_bytes``): such a tree
keeps a single, unused slot (:func:`empty_slots`) and never needs room again.

A model's change detection is not part of a tree (a background tree replaces the tree by one
assignment; the detector and the drift history stay): :class:`DriftArrays` holds ADWIN's
``adwin_b[row, j, TOTAL | VARIANCE]`` (bucket ``j`` of row ``row`` holds ``2**row`` values),
``adwin_n[row]`` (buckets in the row) and the scalars ``adwin_s``; the drift policy's counters
``drift_s`` (``D_*``) and the most recent events ``drift_ev[i] = (kind, at)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "DriftArrays",
    "TreeArrays",
    "capacities",
    "empty_slots",
    "grow",
    "grown_capacities",
    "nbytes",
    "new_arrays",
    "new_drift",
]

# node columns
PARENT, LEFT, RIGHT, KIND, COL, DEPTH, SLOT = range(7)
NODE_COLUMNS = 7
LEAF, NUMERIC, NOMINAL = -1, 0, 1
# hgs columns
THETA, STEP, GRAD, ALPHA = range(4)
HGS_COLUMNS = 4
# num_stats last axis, num_range last axis, slot_seen columns
N_, S_, Q_ = range(3)
MIN, MAX = range(2)
SEEN, LAST_ATTEMPT, BEHIND = range(3)
# adwin
ADWIN_ROWS = 64
TOTAL, VARIANCE = range(2)
(
    A_DELTA,
    A_CLOCK,
    A_MAX_BUCKETS,
    A_WIDTH,
    A_TOTAL,
    A_VARIANCE,
    A_TIME,
    A_DETECTIONS,
    A_CHANGE,
    A_N_ROWS,
    A_DETECTED_AT,
) = range(11)
ADWIN_SCALARS = 11  # models saved with 10 (before A_DETECTED_AT) load with it 0 (persistence.py)

# meta (int64): logical sizes and counters
(
    M_NODES,
    M_EXAMPLES,
    M_CLASSES,
    M_NUMERIC,
    M_NOMINAL,
    M_VALUES,
    M_FREE,
    M_STOPPED,
    M_REFITS,
    M_NB_SCORED,
    M_NB_CLASSES,
    M_NB_NUMERIC,
    M_NB_NOMINAL,
    M_NB_VALUES,
    M_MIX_SCORED,
    M_OVER_BUDGET,
) = range(16)
META_INTS = 16  # models saved before M_OVER_BUDGET had it 0 already (never stopped for a budget)
# meta_f (float64): fitted scalars
(F_THETA0, F_STEP0, F_GRAD0, F_COST, F_GAMMA, F_MIX_A, F_MIX_B, F_MIX_C) = range(8)
META_FLOATS = 8
# drift_s (float64): the drift policy's counters
(D_GAP, D_COMPARED, D_DETECTIONS, D_SWAPS, D_DROPPED, D_TREE_SINCE, D_N_EVENTS, D_ACTIVE) = range(8)
DRIFT_SCALARS = 8
EVENTS_KEPT = 20  # drift_ev rows: (kind, at)
DETECTION, SWAP, DROPPED = range(3)  # event kinds
BUFFER = 512  # naive-Bayes scored examples kept for fitting gamma
WINDOW = 1000  # prequential examples the linear component's pool is fitted on (kernels.linear)
MIN_PROBA = 1e-15  # the floor of a served probability (only MLE needs it)
LOG_MIN_PROBA = float(np.log(MIN_PROBA))


class TreeArrays(NamedTuple):
    """Every array of one tree (see the module docstring for each one's layout)."""

    node: np.ndarray
    thr: np.ndarray
    counts: np.ndarray
    inherited: np.ndarray
    hgs: np.ndarray
    num_stats: np.ndarray
    num_range: np.ndarray
    nom_stats: np.ndarray
    slot_seen: np.ndarray
    free_slots: np.ndarray
    shift: np.ndarray
    nb_num: np.ndarray
    nb_range: np.ndarray
    nb_nom: np.ndarray
    nb_seen: np.ndarray
    nb_mean: np.ndarray
    nb_inv2var: np.ndarray
    nb_const: np.ndarray
    nb_table: np.ndarray
    nb_a: np.ndarray
    nb_b: np.ndarray
    nb_y: np.ndarray
    lr_w: np.ndarray
    lr_bias: np.ndarray
    lr_scale: np.ndarray
    mix_a: np.ndarray
    mix_b: np.ndarray
    mix_y: np.ndarray
    mix_u: np.ndarray
    meta: np.ndarray
    meta_f: np.ndarray


class DriftArrays(NamedTuple):
    """A model's change detector and drift history (see the module docstring)."""

    adwin_b: np.ndarray
    adwin_n: np.ndarray
    adwin_s: np.ndarray
    drift_s: np.ndarray
    drift_ev: np.ndarray


def new_arrays(
    *,
    nodes: int = 16,
    slots: int = 4,
    classes: int = 2,
    numeric: int = 1,
    nominal: int = 1,
    values: int = 1,
    naive_bayes: bool = False,
    prior_weight: float = 1.0,
    linear: bool = False,
) -> TreeArrays:
    """An empty tree (a root leaf owning slot 0) with the given capacities."""
    lin = 1 if linear else 0
    nb_slots = 1 if naive_bayes else 0
    nb_k = classes if naive_bayes else 0
    node = np.full((nodes, NODE_COLUMNS), -1, dtype=np.int64)
    node[:, COL] = 0
    node[:, DEPTH] = 0
    node[0, SLOT] = 0
    hgs = np.zeros((nodes, HGS_COLUMNS))
    hgs[:, STEP] = 0.1
    hgs[:, ALPHA] = 1.0  # exp(0)
    arrays = TreeArrays(
        node=node,
        thr=np.zeros(nodes),
        counts=np.zeros((nodes, classes)),
        inherited=np.zeros((nodes, classes)),
        hgs=hgs,
        num_stats=np.zeros((slots, numeric, classes, 3)),
        num_range=_empty_range(slots, numeric),
        nom_stats=np.zeros((slots, nominal, values, classes)),
        slot_seen=np.zeros((slots, 3)),
        free_slots=np.arange(slots - 1, -1, -1, dtype=np.int64),
        shift=np.zeros(numeric),
        nb_num=np.zeros((nb_slots, numeric, classes, 3)),
        nb_range=_empty_range(nb_slots, numeric),
        nb_nom=np.zeros((nb_slots, nominal, values, classes)),
        nb_seen=np.zeros((nb_slots, 2)),
        nb_mean=np.zeros((numeric * nb_slots, nb_k)),
        nb_inv2var=np.zeros((numeric * nb_slots, nb_k)),
        nb_const=np.zeros((numeric * nb_slots, nb_k)),
        nb_table=np.full((nominal * nb_slots, (values + 1) * nb_slots, nb_k), np.nan),
        nb_a=np.full((BUFFER * nb_slots, nb_k), LOG_MIN_PROBA),
        nb_b=np.zeros((BUFFER * nb_slots, nb_k)),
        nb_y=np.zeros(BUFFER * nb_slots, dtype=np.int64),
        lr_w=np.zeros((classes * lin, numeric * lin)),
        lr_bias=np.zeros((classes * lin, 2)),
        lr_scale=np.zeros((numeric * lin, 4)),
        mix_a=np.full((WINDOW * lin, classes * lin), LOG_MIN_PROBA),
        mix_b=np.full((WINDOW * lin, classes * lin), LOG_MIN_PROBA),
        mix_y=np.zeros(WINDOW * lin, dtype=np.int64),
        mix_u=np.zeros(WINDOW * lin),
        meta=np.zeros(META_INTS, dtype=np.int64),
        meta_f=np.zeros(META_FLOATS),
    )
    arrays.meta[M_NODES] = 1
    arrays.meta[M_FREE] = slots - 1  # slot 0 is the root's: the stack holds slots-1 .. 1
    arrays.free_slots[: slots - 1] = np.arange(slots - 1, 0, -1)
    arrays.meta_f[F_THETA0] = np.log(prior_weight)
    arrays.meta_f[F_STEP0] = 0.1
    arrays.meta_f[F_MIX_A] = 1.0  # the pool starts as the tree alone
    return arrays


def new_drift(delta: float) -> DriftArrays:
    """A fresh detector with confidence ``delta`` (ADWIN's defaults: clock 32, 5 buckets a
    row) and an empty history."""
    drift = DriftArrays(
        adwin_b=np.zeros((ADWIN_ROWS, 6, 2)),
        adwin_n=np.zeros(ADWIN_ROWS, dtype=np.int64),
        adwin_s=np.zeros(ADWIN_SCALARS),
        drift_s=np.zeros(DRIFT_SCALARS),
        drift_ev=np.zeros((EVENTS_KEPT, 2), dtype=np.int64),
    )
    drift.adwin_s[A_DELTA] = delta
    drift.adwin_s[A_CLOCK] = 32
    drift.adwin_s[A_MAX_BUCKETS] = 5
    drift.adwin_s[A_N_ROWS] = 1
    return drift


def _fit(a: np.ndarray, shape: tuple[int, ...], fill: float) -> np.ndarray:
    """``a`` copied into the corner of a new array of ``shape`` filled with ``fill``."""
    if a.shape == shape:
        return a
    out = np.full(shape, fill, dtype=a.dtype)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def _capacity(have: int, need: int) -> int:
    """``have`` doubled until it holds ``need``: capacities are then a function of the largest
    logical size alone (one class at a time or five at once end at the same capacity), so a
    batch and the same rows one at a time give the same arrays."""
    have = max(have, 1)
    while have < need:
        have *= 2
    return have


def capacities(t: TreeArrays) -> tuple[int, int, int, int, int, int]:
    """``(N, M, K, F, C, V)``: the capacities of nodes, slots, classes, numeric and nominal
    columns and nominal values."""
    return (
        t.node.shape[0],
        t.slot_seen.shape[0],
        t.counts.shape[1],
        t.shift.shape[0],
        t.nom_stats.shape[1],
        t.nom_stats.shape[2],
    )


def grown_capacities(
    t: TreeArrays,
    *,
    nodes: int = 0,
    slots: int = 0,
    classes: int = 0,
    numeric: int = 0,
    nominal: int = 0,
    values: int = 0,
) -> tuple[int, int, int, int, int, int]:
    """The capacities :func:`grow` gives ``t`` for these arguments (without growing it)."""
    n_cap, m_cap, k_cap, f_cap, c_cap, v_cap = capacities(t)
    free = int(t.meta[M_FREE])
    M = m_cap if free >= slots else max(m_cap + slots - free, 2 * m_cap)
    return (
        _capacity(n_cap, nodes),
        M,
        _capacity(k_cap, classes),
        _capacity(f_cap, numeric),
        _capacity(c_cap, nominal),
        _capacity(v_cap, values),
    )


def nbytes(caps: tuple[int, int, int, int, int, int], naive_bayes: bool, linear: bool) -> int:
    """The bytes of a tree's arrays at capacities ``caps`` (:func:`capacities`), with or
    without the naive-Bayes factor and the linear component: per node ``7 + 1 + 4`` ints and
    floats and two counts per class; per slot ``F K 3 + 2 F + C V K + 4`` values; then the
    factor's and the component's arrays and ``meta``. Equal to the sum of the ``nbytes`` of
    the arrays :func:`grow` makes (a test checks it), without making them."""
    N, M, K, F, C, V = caps
    nb, lin = int(naive_bayes), int(linear)
    cells = N * (NODE_COLUMNS + 1 + HGS_COLUMNS + 2 * K) + F
    cells += M * (F * K * 3 + F * 2 + C * V * K + 3 + 1)
    cells += nb * (F * K * 3 + F * 2 + C * V * K + 2 + 3 * F * K + C * (V + 1) * K + 2 * BUFFER * K + BUFFER)
    cells += lin * (K * F + K * 2 + F * 4 + 2 * WINDOW * K + 2 * WINDOW)
    return 8 * (cells + META_INTS + META_FLOATS)


def empty_slots(slots: int, numeric: int, nominal: int, values: int, classes: int) -> dict[str, np.ndarray]:
    """Split statistics of ``slots`` empty slots at these capacities, all free (the lowest on
    top of the stack): the fields ``num_stats``, ``num_range``, ``nom_stats``, ``slot_seen``
    and ``free_slots`` of :class:`TreeArrays`."""
    return {
        "num_stats": np.zeros((slots, numeric, classes, 3)),
        "num_range": _empty_range(slots, numeric),
        "nom_stats": np.zeros((slots, nominal, values, classes)),
        "slot_seen": np.zeros((slots, 3)),
        "free_slots": np.arange(slots - 1, -1, -1, dtype=np.int64),
    }


def grow(
    t: TreeArrays,
    *,
    nodes: int = 0,
    slots: int = 0,
    classes: int = 0,
    numeric: int = 0,
    nominal: int = 0,
    values: int = 0,
) -> TreeArrays:
    """``t`` with room for at least this many nodes, free slots, classes, numeric and nominal
    columns and nominal values (capacities double; values and logical sizes are kept).

    Returns ``t`` itself when it is already large enough, else a new :class:`TreeArrays`
    whose arrays are copies (the old ones are left as they were).
    """
    have = capacities(t)
    n_cap, m_cap = have[0], have[1]
    free = int(t.meta[M_FREE])
    N, M, K, F, C, V = grown_capacities(
        t, nodes=nodes, slots=slots, classes=classes, numeric=numeric, nominal=nominal, values=values
    )
    if (N, M, K, F, C, V) == have:
        return t
    nb = t.nb_seen.shape[0]  # 1 with the naive-Bayes factor, else 0
    lin = 1 if t.mix_y.shape[0] else 0  # 1 with the linear component
    node = _fit(t.node, (N, NODE_COLUMNS), -1)
    node[n_cap:, COL] = 0
    node[n_cap:, DEPTH] = 0
    hgs = _fit(t.hgs, (N, HGS_COLUMNS), 0.0)
    hgs[n_cap:, STEP] = 0.1
    hgs[n_cap:, ALPHA] = 1.0
    free_slots = _fit(t.free_slots, (M,), 0)
    added = np.arange(M - 1, m_cap - 1, -1, dtype=np.int64)  # new slots, the lowest on top
    if added.size:
        # the stack keeps its lowest slot on top: new (higher) slots go underneath
        free_slots[: added.size + free] = np.concatenate([added, t.free_slots[:free]])
    meta = t.meta.copy()
    meta[M_FREE] = free + added.size
    return TreeArrays(
        node=node,
        thr=_fit(t.thr, (N,), 0.0),
        counts=_fit(t.counts, (N, K), 0.0),
        inherited=_fit(t.inherited, (N, K), 0.0),
        hgs=hgs,
        num_stats=_fit(t.num_stats, (M, F, K, 3), 0.0),
        num_range=_fit_range(t.num_range, M, F),
        nom_stats=_fit(t.nom_stats, (M, C, V, K), 0.0),
        slot_seen=_fit(t.slot_seen, (M, 3), 0.0),
        free_slots=free_slots,
        shift=_fit(t.shift, (F,), 0.0),
        nb_num=_fit(t.nb_num, (nb, F, K, 3), 0.0),
        nb_range=_fit_range(t.nb_range, nb, F),
        nb_nom=_fit(t.nb_nom, (nb, C, V, K), 0.0),
        nb_seen=t.nb_seen,
        nb_mean=_fit(t.nb_mean, (F * nb, K * nb), 0.0),
        nb_inv2var=_fit(t.nb_inv2var, (F * nb, K * nb), 0.0),
        nb_const=_fit(t.nb_const, (F * nb, K * nb), 0.0),
        nb_table=_nb_table(t.nb_table, C * nb, (V + 1) * nb, K * nb),
        nb_a=_fit(t.nb_a, (BUFFER * nb, K * nb), LOG_MIN_PROBA),
        nb_b=_fit(t.nb_b, (BUFFER * nb, K * nb), 0.0),
        nb_y=t.nb_y,
        lr_w=_fit(t.lr_w, (K * lin, F * lin), 0.0),
        lr_bias=_fit(t.lr_bias, (K * lin, 2), 0.0),
        lr_scale=_fit(t.lr_scale, (F * lin, 4), 0.0),
        mix_a=_fit(t.mix_a, (WINDOW * lin, K * lin), LOG_MIN_PROBA),
        mix_b=_fit(t.mix_b, (WINDOW * lin, K * lin), LOG_MIN_PROBA),
        mix_y=t.mix_y,
        mix_u=t.mix_u,
        meta=meta,
        meta_f=t.meta_f.copy(),
    )


def _fit_range(a: np.ndarray, slots: int, numeric: int) -> np.ndarray:
    out = np.empty((slots, numeric, 2))
    out[..., MIN] = np.inf
    out[..., MAX] = -np.inf
    out[: a.shape[0], : a.shape[1]] = a
    return out


def _nb_table(table: np.ndarray, nominal: int, rows: int, classes: int) -> np.ndarray:
    """The log-probability table with room for more columns, values and classes. Its last
    meaningful row (unseen values) stays where the last refresh put it: readers take the row
    count from ``meta[M_NB_VALUES]``."""
    return _fit(table, (nominal, rows, classes), np.nan)


def _empty_range(slots: int, numeric: int) -> np.ndarray:
    out = np.empty((slots, numeric, 2))
    out[..., MIN] = np.inf
    out[..., MAX] = -np.inf
    return out
