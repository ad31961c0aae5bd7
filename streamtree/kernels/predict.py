"""Prediction over a tree's arrays: what the model serves at the end of a row's path.

The served probabilities are the smoother's along the path (:func:`tree_proba`), pooled with
the linear component and tempered by the naive-Bayes factor when those are on
(:func:`serve`). :func:`predict_rows` serves a batch of rows; the learning loop
(:mod:`streamtree.kernels.learn`) and the forest's (:mod:`streamtree.kernels.forest`) serve
each row before learning it with the same kernels, so they serve the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamtree.kernels.borrow import borrow, hold
from streamtree.kernels.codes import C_LINEAR, C_M, C_NB, C_SMOOTHER
from streamtree.kernels.linear import lr_proba_row, mix_pool, uncertainty
from streamtree.kernels.naive_bayes import nb_loglik, nb_temper
from streamtree.kernels.route import route
from streamtree.kernels.smoothing import MLE, path_proba
from streamtree.state import (
    F_GAMMA,
    F_MIX_A,
    F_MIX_B,
    F_MIX_C,
    F_THETA0,
    M_CLASSES,
    M_NB_CLASSES,
    M_NB_NOMINAL,
    M_NB_NUMERIC,
    M_NB_VALUES,
    M_NODES,
    M_NUMERIC,
    MIN_PROBA,
)

__all__ = ["predict_rows", "proba_at", "serve", "temper", "tree_loglik", "tree_proba"]


@njit(cache=True, inline="always")
def tree_proba(cfg_i, cfg_f, counts, hgs, theta0, path, length, k, out) -> None:  # type: ignore[no-untyped-def]
    """The tree's own probabilities at the end of ``path`` (``out[:k]``): the smoother's,
    floored at ``MIN_PROBA`` and renormalised for MLE, the only smoother that gives zeros.
    (It takes the arrays it reads, not the tree's handle.)"""
    path_proba(cfg_i[C_SMOOTHER], cfg_f[C_M], counts, hgs, theta0, path, length, k, out)
    if cfg_i[C_SMOOTHER] == MLE:
        total = 0.0
        for j in range(k):
            if out[j] < MIN_PROBA:
                out[j] = MIN_PROBA
            total += out[j]
        for j in range(k):
            out[j] /= total


@njit(cache=True, inline="always")
def serve(t, cfg_i, cfg_f, path, length, num_row, nom_row, out, smoothed, loglik):  # type: ignore[no-untyped-def]
    """What the model serves at the end of ``path``: the tree's own probabilities
    (:func:`tree_proba`), pooled with the linear component
    (:func:`~streamtree.kernels.linear.mix_pool`) when it is on and its weights are not the
    tree's alone, then tempered by the naive-Bayes factor ``smoothed * exp(gamma * loglik)``
    renormalised when ``gamma > 0``. Writes ``out[:K]`` and leaves the untempered
    probabilities (the pool) in ``smoothed[:K]``."""
    k = t.meta[M_CLASSES]
    tree_proba(cfg_i, cfg_f, t.counts, t.hgs, t.meta_f[F_THETA0], path, length, k, smoothed)
    if cfg_i[C_LINEAR]:
        a, b, c = t.meta_f[F_MIX_A], t.meta_f[F_MIX_B], t.meta_f[F_MIX_C]
        if a != 1.0 or b != 0.0 or c != 0.0:
            b = b + c * uncertainty(smoothed, k)  # the regression's weight at this leaf
            lr_proba_row(t.lr_w, t.lr_bias, t.lr_scale, num_row, t.meta[M_NUMERIC], k, loglik)
            mix_pool(smoothed, loglik, a, b, k, smoothed)
    temper(t, cfg_i, num_row, nom_row, smoothed, k, out, loglik)


@njit(cache=True, inline="always")
def temper(t, cfg_i, num_row, nom_row, pooled, k, out, loglik):  # type: ignore[no-untyped-def]
    """``out[:k]``: the untempered probabilities ``pooled`` tempered by the naive-Bayes factor,
    ``pooled * exp(gamma * loglik)`` renormalised, when it is on and ``gamma > 0``; else a copy
    of them. ``loglik`` is scratch (the row's log likelihoods)."""
    gamma = t.meta_f[F_GAMMA]
    if cfg_i[C_NB] and gamma != 0.0:
        tree_loglik(t, num_row, nom_row, k, loglik)
        nb_temper(pooled, loglik, gamma, k, out)
    else:
        for j in range(k):
            out[j] = pooled[j]


@njit(cache=True)
def proba_at(t, cfg_i, cfg_f, path, length, num_row, nom_row, out, smoothed, loglik):  # type: ignore[no-untyped-def]
    """:func:`serve` as a call: the learning loop's uses (a few an example learned, one
    compiled body for all of them). The prediction loops inline :func:`serve` instead
    (:mod:`streamtree.kernels`, "Handles and inlined kernels")."""
    serve(t, cfg_i, cfg_f, path, length, num_row, nom_row, out, smoothed, loglik)


@njit(cache=True)
def tree_loglik(t, num_row, nom_row, k, out):  # type: ignore[no-untyped-def]
    """``out[:k]``: the naive-Bayes log likelihood of the row under each class, from the tree's
    fitted factor (:func:`~streamtree.kernels.naive_bayes.nb_loglik`)."""
    nb_loglik(
        t.nb_mean,
        t.nb_inv2var,
        t.nb_const,
        t.nb_table,
        t.shift,
        t.meta[M_NB_CLASSES],
        t.meta[M_NB_NUMERIC],
        t.meta[M_NB_NOMINAL],
        t.meta[M_NB_VALUES],
        num_row,
        nom_row,
        k,
        out,
    )


@njit(cache=True)
def predict_rows(tree, cfg_i, cfg_f, num, nom, out):  # type: ignore[no-untyped-def]
    """``out[r, :K]``: the probabilities served for each encoded row (see :func:`serve`).

    ``tree`` is the tree's handle (:mod:`streamtree.kernels.handle`: its arrays in one
    object, read by name)."""
    t = tree  # its arrays are borrowed (streamtree.kernels.handle); so are these, in the loop
    cfg_i, cfg_f, num, nom, out = borrow(cfg_i), borrow(cfg_f), borrow(num), borrow(nom), borrow(out)
    k = t.meta[M_CLASSES]
    held_path, held_work = np.empty(t.meta[M_NODES], dtype=np.int64), np.empty((2, max(k, 1)))
    path, work = borrow(held_path), borrow(held_work)
    smoothed, loglik = work[0], work[1]
    for r in range(num.shape[0]):
        num_row, nom_row = num[r], nom[r]
        length = route(t.node, t.thr, num_row, nom_row, path)
        serve(t, cfg_i, cfg_f, path, length, num_row, nom_row, out[r], smoothed, loglik)
    hold(held_path, held_work)
