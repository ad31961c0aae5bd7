"""The periodic refit of one tree, every ``refit_every`` of its examples: the naive-Bayes
factor, forgetting and the HGS weights (called by :func:`streamtree.kernels.learn.learn_in_tree`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from streamtree.kernels.codes import C_HALF_LIFE, C_HONEST, C_NB, C_REFIT_EVERY, C_REFIT_STEPS, C_SMOOTHER
from streamtree.kernels.hgs import refit_online
from streamtree.kernels.naive_bayes import nb_fit, nb_refresh
from streamtree.kernels.smoothing import HGS
from streamtree.state import (
    BEHIND,
    F_GAMMA,
    F_THETA0,
    KIND,
    LEAF,
    M_CLASSES,
    M_NB_CLASSES,
    M_NB_NOMINAL,
    M_NB_NUMERIC,
    M_NB_SCORED,
    M_NB_VALUES,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_REFITS,
    M_VALUES,
    PARENT,
    SLOT,
)

__all__ = ["catch_up", "forgetting_factor", "refit"]


@njit(cache=True, inline="always")
def forgetting_factor(cfg_i) -> float:  # type: ignore[no-untyped-def]
    """What one forgetting pass multiplies a count by: ``0.5 ** (refit_every / half_life)``."""
    return 0.5 ** (cfg_i[C_REFIT_EVERY] / cfg_i[C_HALF_LIFE])  # type: ignore[no-any-return]


@njit(cache=True, inline="always")
def catch_up(t, cfg_i, slot) -> None:  # type: ignore[no-untyped-def]
    """Apply the forgetting passes ``slot``'s split statistics missed
    (``b = slot_seen[slot, BEHIND]``, counted by :func:`refit`): each sum times
    ``forgetting_factor ** b``, then ``b = 0``. Called before the leaf learns an example, the
    only time its statistics are read (the split attempt follows the example), so a split
    sees what scaling every slot at every pass would give: the same bits when ``b = 1``
    (``x ** 1.0`` is ``x``), a rounding apart for more, at a cost per example learned instead
    of per slot and pass (``docs/decisions/forgetting.md``)."""
    behind = t.slot_seen[slot, BEHIND]
    if behind > 0.0:
        scale = forgetting_factor(cfg_i) ** behind
        t.num_stats[slot] *= scale  # sums: their mean and variance keep
        t.nom_stats[slot] *= scale
        t.slot_seen[slot, BEHIND] = 0.0


@njit(cache=True)
def refit(t, cfg_i) -> None:  # type: ignore[no-untyped-def]
    """Every ``refit_every`` examples: the naive-Bayes parameters and ``gamma``, forgetting
    (every count times :func:`forgetting_factor`, so that all examples of one block weigh the
    same; every growing leaf's split statistics too, but lazily: the pass is counted in
    ``slot_seen[slot, BEHIND]`` and :func:`catch_up` applies it when the leaf next learns, so a
    split chosen after a change sees the new concept, and the children's inherited counts are
    the new concept's), then a few warm-started HGS steps on the leave-one-out objective of the
    honest counts (``counts - inherited``) or of all counts."""
    n = t.meta[M_NODES]
    k = t.meta[M_CLASSES]
    if cfg_i[C_NB]:
        nb_refresh(
            t.nb_num,
            t.nb_nom,
            k,
            t.meta[M_NUMERIC],
            t.meta[M_NOMINAL],
            t.meta[M_VALUES],
            t.nb_mean,
            t.nb_inv2var,
            t.nb_const,
            t.nb_table,
        )
        t.meta[M_NB_CLASSES] = k
        t.meta[M_NB_NUMERIC] = t.meta[M_NUMERIC]
        t.meta[M_NB_NOMINAL] = t.meta[M_NOMINAL]
        t.meta[M_NB_VALUES] = t.meta[M_VALUES]
        t.meta_f[F_GAMMA] = nb_fit(t.nb_a, t.nb_b, t.nb_y, t.meta[M_NB_SCORED], k, t.meta_f[F_GAMMA])
    if cfg_i[C_HALF_LIFE] > 0:
        factor = forgetting_factor(cfg_i)
        for i in range(n):
            for c in range(k):
                t.counts[i, c] *= factor
                t.inherited[i, c] *= factor
            slot = t.node[i, SLOT]
            if slot >= 0:  # a growing leaf's split statistics forget when next read (catch_up)
                t.slot_seen[slot, BEHIND] += 1.0
    if cfg_i[C_SMOOTHER] == HGS and k > 0:
        fit = np.empty((n, k))
        internal = np.empty(n, dtype=np.bool_)
        for i in range(n):
            internal[i] = t.node[i, KIND] != LEAF
            for c in range(k):
                fit[i, c] = t.counts[i, c] - t.inherited[i, c] if cfg_i[C_HONEST] else t.counts[i, c]
        parent = t.node[:n, PARENT].copy()
        refit_online(parent, internal, fit, n, k, t.hgs, t.meta_f[F_THETA0 : F_THETA0 + 3], cfg_i[C_REFIT_STEPS])
        t.meta[M_REFITS] += 1
