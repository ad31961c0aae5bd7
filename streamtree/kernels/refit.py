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

__all__ = ["refit"]


@njit(cache=True)
def refit(t, cfg_i) -> None:  # type: ignore[no-untyped-def]
    """Every ``refit_every`` examples: the naive-Bayes parameters and ``gamma``, forgetting
    (every count, and every growing leaf's split statistics, times
    ``0.5 ** (refit_every / half_life)``, so that all examples of one block weigh the same: a
    split chosen after a change sees the new concept, and the children's inherited counts
    are the new concept's), then a few warm-started HGS steps on the leave-one-out objective of the
    honest counts (``counts - inherited``) or of all counts."""
    n = t.meta[M_NODES]
    k = t.meta[M_CLASSES]
    if cfg_i[C_NB]:
        nb_refresh(
            t.nb_num,
            t.nb_nom,
            t.shift,
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
        factor = 0.5 ** (cfg_i[C_REFIT_EVERY] / cfg_i[C_HALF_LIFE])
        for i in range(n):
            for c in range(k):
                t.counts[i, c] *= factor
                t.inherited[i, c] *= factor
            slot = t.node[i, SLOT]
            if slot >= 0:  # a growing leaf's split statistics forget too (sums: mean and variance keep)
                t.num_stats[slot] *= factor
                t.nom_stats[slot] *= factor
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
