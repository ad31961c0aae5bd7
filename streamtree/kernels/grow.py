"""Growing a tree in its arrays: room for a split, the slots of split statistics, the split
attempt and the split itself.

A growing leaf owns a *slot* of split statistics (:mod:`streamtree.kernels.leaf_stats`); free
slots are a stack in ``free_slots[:meta[M_FREE]]``. A split turns a leaf into an internal node
with two new leaves, each taking a slot while the tree may still grow deeper, and gives the
leaf's slot back. The learning loop (:mod:`streamtree.kernels.learn`) attempts a split every
``grace_period`` examples of a leaf (:func:`attempt_split`) and asks Python to grow the arrays
first when they might not hold one (:func:`has_room`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streamtree.kernels.codes import (
    C_CRITERION,
    C_DELTA,
    C_INHERIT,
    C_MAX_DEPTH,
    C_MAX_NODES,
    C_MIN_BRANCH,
    C_SEED,
    C_SPLIT_POINTS,
    C_SPLITTER,
    C_SUBSPACE,
    C_TAU,
    C_TAU_RANGE,
    RANDOM,
    SUBSPACE,
)
from streamtree.kernels.criteria import split_decision
from streamtree.kernels.leaf_stats import classes_seen, splittable
from streamtree.kernels.randomness import mix, uniform
from streamtree.kernels.split import best_split, random_split
from streamtree.state import (
    ALPHA,
    COL,
    DEPTH,
    GRAD,
    KIND,
    LAST_ATTEMPT,
    LEAF,
    LEFT,
    M_CLASSES,
    M_FREE,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_OVER_BUDGET,
    M_STOPPED,
    M_VALUES,
    MAX,
    MIN,
    PARENT,
    RIGHT,
    SEEN,
    SLOT,
    STEP,
    THETA,
)

__all__ = ["MERIT_NOISE", "attempt_split", "has_room"]

MERIT_NOISE = 1e-12  # a smaller merit is rounding noise (a one-class leaf's gains are +-1e-15): no split


@njit(cache=True)
def has_room(meta, capacity, splits) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``splits`` more splits fit in a tree's arrays (``meta``, and ``capacity``
    nodes; a split adds two nodes and takes two slots); an example learned ``w`` times may
    cause up to ``w``. A tree stopped for its memory budget never splits again: it has room."""
    if meta[M_OVER_BUDGET] != 0:
        return True
    if meta[M_NODES] + 2 * splits > capacity:
        return False
    return meta[M_STOPPED] == 1 or meta[M_FREE] >= 2 * splits


@njit(cache=True)
def _take_slot(t) -> int:  # type: ignore[no-untyped-def]
    t.meta[M_FREE] -= 1
    return t.free_slots[t.meta[M_FREE]]


@njit(cache=True)
def _release_slot(t, slot) -> None:  # type: ignore[no-untyped-def]
    """Zero a slot and push it on the free stack, keeping the lowest slot on top."""
    t.num_stats[slot] = 0.0
    t.num_range[slot, :, MIN] = np.inf
    t.num_range[slot, :, MAX] = -np.inf
    t.nom_stats[slot] = 0.0
    t.slot_seen[slot] = 0.0
    i = t.meta[M_FREE]
    while i > 0 and t.free_slots[i - 1] < slot:
        t.free_slots[i] = t.free_slots[i - 1]
        i -= 1
    t.free_slots[i] = slot
    t.meta[M_FREE] += 1


@njit(cache=True)
def _stop_growth(t) -> None:  # type: ignore[no-untyped-def]
    """Free every leaf's split statistics: the tree keeps counting but no longer splits."""
    n = t.meta[M_NODES]
    for i in range(n):
        t.node[i, SLOT] = -1
    m = t.slot_seen.shape[0]
    t.num_stats[:] = 0.0
    t.num_range[:, :, MIN] = np.inf
    t.num_range[:, :, MAX] = -np.inf
    t.nom_stats[:] = 0.0
    t.slot_seen[:] = 0.0
    for j in range(m):
        t.free_slots[j] = m - 1 - j
    t.meta[M_FREE] = m
    t.meta[M_STOPPED] = 1


@njit(cache=True)
def _split(t, cfg_i, leaf, kind, col, threshold, left, right) -> None:  # type: ignore[no-untyped-def]
    """Turn ``leaf`` into an internal node with two new leaves.

    Each child starts from the split statistics' estimate of the examples that would have
    reached it (``leaf_init="inherit"``) or from zero, and from its parent's HGS weight."""
    n = t.meta[M_NODES]
    if n + 2 > cfg_i[C_MAX_NODES]:
        _stop_growth(t)
        return
    k = t.meta[M_CLASSES]
    depth = t.node[leaf, DEPTH] + 1
    can_grow = cfg_i[C_MAX_DEPTH] < 0 or depth < cfg_i[C_MAX_DEPTH]
    for j in range(2):
        child = n + j
        side = left if j == 0 else right
        t.node[child, PARENT] = leaf
        t.node[child, LEFT] = -1
        t.node[child, RIGHT] = -1
        t.node[child, KIND] = LEAF
        t.node[child, COL] = 0
        t.node[child, DEPTH] = depth
        t.node[child, SLOT] = _take_slot(t) if can_grow else -1
        t.thr[child] = 0.0
        t.counts[child] = 0.0
        t.inherited[child] = 0.0
        if cfg_i[C_INHERIT]:
            for c in range(k):
                t.counts[child, c] = side[c]
                t.inherited[child, c] = side[c]
        t.hgs[child, THETA] = t.hgs[leaf, THETA]
        t.hgs[child, STEP] = 0.1
        t.hgs[child, GRAD] = 0.0
        t.hgs[child, ALPHA] = t.hgs[leaf, ALPHA]
    t.node[leaf, LEFT] = n
    t.node[leaf, RIGHT] = n + 1
    t.node[leaf, KIND] = kind
    t.node[leaf, COL] = col
    t.thr[leaf] = threshold
    _release_slot(t, t.node[leaf, SLOT])
    t.node[leaf, SLOT] = -1
    t.meta[M_NODES] = n + 2


@njit(cache=True)
def _feature_draws(cfg_i, fkeys, n_features, leaf, attempt):  # type: ignore[no-untyped-def]
    """One draw per feature for this attempt, ``mix(seed, leaf, attempt, key_f)``: a random
    order of the features that does not depend on their columns."""
    draws = np.empty(n_features, dtype=np.uint64)
    for f in range(n_features):
        draws[f] = mix(cfg_i[C_SEED], leaf, attempt, fkeys[f])
    return draws


@njit(cache=True)
def _subspace(t, cfg_i, fkeys, slot, leaf, attempt):  # type: ignore[no-untyped-def]
    """The features a random-subspace attempt may split on: of the ``n`` that can separate
    the leaf's examples (:func:`~streamtree.kernels.leaf_stats.splittable`; features the leaf never
    saw would only dilute the draw, and would make it depend on when a batch registered
    them), the ``m`` with the smallest draws (:func:`_feature_draws`), a uniformly random
    subset, with ``m = cfg_i[C_SUBSPACE]`` or, when that is 0, ``round(sqrt(n))`` (at least 1)
    as in Breiman's random forests."""
    n_numeric, n_nominal = t.meta[M_NUMERIC], t.meta[M_NOMINAL]
    n_features = n_numeric + n_nominal
    allowed = np.zeros(n_features, dtype=np.bool_)
    n = 0
    for f in range(n_features):
        allowed[f] = splittable(
            t.num_stats, t.num_range, t.nom_stats, slot, t.meta[M_CLASSES], n_numeric, t.meta[M_VALUES], f
        )
        n += allowed[f]
    m = cfg_i[C_SUBSPACE] if cfg_i[C_SUBSPACE] > 0 else max(1, int(round(math.sqrt(n))))
    if m >= n:
        return allowed
    draws = _feature_draws(cfg_i, fkeys, n_features, leaf, attempt)
    for f in range(n_features):
        if not allowed[f]:
            draws[f] = np.uint64(0xFFFFFFFFFFFFFFFF)  # last
    order = np.argsort(draws, kind="mergesort")
    allowed[:] = False
    for j in range(m):
        allowed[order[j]] = True
    return allowed


@njit(cache=True)
def attempt_split(t, cfg_i, cfg_f, fkeys, leaf, left, right) -> None:  # type: ignore[no-untyped-def]
    """Try to split ``leaf`` (its ``grace_period`` examples since the last attempt are in).

    The Hoeffding splitter takes the best split by the criterion when the Hoeffding test
    says it is best; the subspace splitter does the same among a random subset of the
    features (:func:`_subspace`); the random splitter takes a random split
    (:func:`~streamtree.kernels.split.random_split`) without any test, unless the leaf's
    examples are all of one class. Draws are keyed by the tree's seed, the leaf and the
    attempt (:mod:`streamtree.kernels.randomness`)."""
    slot = t.node[leaf, SLOT]
    seen = t.slot_seen[slot, SEEN]
    t.slot_seen[slot, LAST_ATTEMPT] = seen
    k = t.meta[M_CLASSES]
    n_numeric, n_nominal = t.meta[M_NUMERIC], t.meta[M_NOMINAL]
    splitter = cfg_i[C_SPLITTER]
    attempt = int(seen)
    if splitter == RANDOM:
        found, kind, col, threshold = random_split(
            t.num_stats,
            t.num_range,
            t.nom_stats,
            t.shift,
            slot,
            k,
            n_numeric,
            n_nominal,
            t.meta[M_VALUES],
            _feature_draws(cfg_i, fkeys, n_numeric + n_nominal, leaf, attempt),
            uniform(cfg_i[C_SEED], leaf, attempt, 1),
            left,
            right,
        )
        n_present = 0
        for c in range(k):
            if left[c] + right[c] > 0.0:
                n_present += 1
        if found and n_present >= 2:
            _split(t, cfg_i, leaf, kind, col, threshold, left, right)
        return
    if classes_seen(t.num_stats, t.nom_stats, slot, k, n_numeric, n_nominal, t.meta[M_VALUES]) < 2:
        return  # every merit would be rounding noise: no split (below)
    if splitter == SUBSPACE:
        allowed = _subspace(t, cfg_i, fkeys, slot, leaf, attempt)
    else:
        allowed = np.ones(n_numeric + n_nominal, dtype=np.bool_)
    found, kind, col, threshold, merit, second = best_split(
        t.num_stats,
        t.num_range,
        t.nom_stats,
        t.shift,
        slot,
        k,
        n_numeric,
        n_nominal,
        t.meta[M_VALUES],
        cfg_i[C_CRITERION],
        cfg_i[C_SPLIT_POINTS],
        cfg_f[C_MIN_BRANCH],
        allowed,
        fkeys,
        left,
        right,
    )
    if not found or merit <= MERIT_NOISE:
        return
    if split_decision(merit, second, cfg_i[C_CRITERION], k, cfg_f[C_DELTA], cfg_f[C_TAU], seen, cfg_i[C_TAU_RANGE]):
        _split(t, cfg_i, leaf, kind, col, threshold, left, right)
