"""The linear component's share of learning one example (called by
:func:`streamtree.kernels.learn.learn_in_tree`): the pool's scoring and refit, and the
regression's step; and the prediction of a row about to be learned, which keeps what that
step reads (:func:`serve_to_learn`). The component itself: :mod:`streamtree.kernels.linear`."""

from __future__ import annotations

import math

from numba import njit

from streamtree.kernels.codes import C_LINEAR
from streamtree.kernels.linear import (
    lr_learn,
    lr_proba,
    lr_proba_row,
    mix_fit,
    mix_pool,
    mix_score,
    refit_due,
    standardise,
    uncertainty,
)
from streamtree.kernels.predict import temper, tree_proba
from streamtree.state import F_MIX_A, F_MIX_B, F_MIX_C, F_THETA0, M_CLASSES, M_MIX_SCORED, M_NUMERIC

__all__ = ["learn_linear", "serve_to_learn"]


@njit(cache=True, inline="always")
def serve_to_learn(t, cfg_i, cfg_f, path, length, num_row, nom_row, out, p_tree, p_lr, z, pooled, loglik):  # type: ignore[no-untyped-def]
    """:func:`~streamtree.kernels.predict.serve` of a row the learning loop learns next: the
    same bits in ``out[:K]``, computed so that :func:`learn_linear` need not compute them
    again. The tree's own probabilities stay in ``p_tree``; with the linear component on (and
    numeric columns) the standardised values stay in ``z`` and the
    regression's probabilities in ``p_lr`` (:func:`~streamtree.kernels.linear.standardise`
    then :func:`~streamtree.kernels.linear.lr_proba`: the bits of ``serve``'s
    :func:`~streamtree.kernels.linear.lr_proba_row`). Returns whether it kept them, for
    :func:`learn_linear`'s ``fresh``; ``pooled`` and ``loglik`` are scratch."""
    k, n_numeric = t.meta[M_CLASSES], t.meta[M_NUMERIC]
    tree_proba(cfg_i, cfg_f, t.counts, t.hgs, t.meta_f[F_THETA0], path, length, k, p_tree)
    served = p_tree
    kept = cfg_i[C_LINEAR] != 0 and n_numeric > 0
    if cfg_i[C_LINEAR]:
        if kept:
            standardise(t.lr_scale, num_row, n_numeric, z)
            lr_proba(t.lr_w, t.lr_bias, z, n_numeric, k, p_lr)
        a, b, c = t.meta_f[F_MIX_A], t.meta_f[F_MIX_B], t.meta_f[F_MIX_C]
        if a != 1.0 or b != 0.0 or c != 0.0:
            if not kept:
                lr_proba_row(t.lr_w, t.lr_bias, t.lr_scale, num_row, n_numeric, k, p_lr)
            mix_pool(p_tree, p_lr, a, b + c * uncertainty(p_tree, k), k, pooled)
            served = pooled
    temper(t, cfg_i, num_row, nom_row, served, k, out, loglik)
    return kept


@njit(cache=True, inline="always")
def learn_linear(
    t,
    cfg_i,
    cfg_f,
    num_row,
    k,
    path,
    length,
    n_classes,
    n_numeric,
    p_tree,
    p_lr,
    z,
    pooled,  # type: ignore[no-untyped-def]
    want_score,
    fresh,
) -> float:
    """The linear component's share of learning one example of class ``k``: score the tree's
    smoothed probabilities and the regression's before either learns it into the pool's
    window (scoring every other example only cost log loss on the short streams:
    ``docs/decisions/linear-component.md``), refit the pool when due (:func:`~streamtree.kernels.linear.refit_due`), and take
    the regression's step (:mod:`streamtree.kernels.linear`). ``p_tree``, ``p_lr``, ``z`` (``3 F``) and
    ``pooled`` are scratch. With ``want_score``, returns the pool's probability of ``k`` before the
    example was learned: what :func:`proba_at` served without the naive-Bayes factor, the same
    bits (the same kernels on the same values); NaN otherwise. With ``fresh``, ``z``, ``p_lr``
    and ``p_tree`` already hold this example's values (:func:`serve_to_learn`, nothing
    learned since) and are not computed again."""
    if not fresh:
        standardise(t.lr_scale, num_row, n_numeric, z)
        lr_proba(t.lr_w, t.lr_bias, z, n_numeric, n_classes, p_lr)
        tree_proba(cfg_i, cfg_f, t.counts, t.hgs, t.meta_f[F_THETA0], path, length, n_classes, p_tree)
    served = math.nan
    if want_score:
        a, b, c = t.meta_f[F_MIX_A], t.meta_f[F_MIX_B], t.meta_f[F_MIX_C]
        served = p_tree[k]
        if a != 1.0 or b != 0.0 or c != 0.0:  # as proba_at pools
            mix_pool(p_tree, p_lr, a, b + c * uncertainty(p_tree, n_classes), n_classes, pooled)
            served = pooled[k]
    mix_score(t.mix_a, t.mix_b, t.mix_y, t.mix_u, t.meta[M_MIX_SCORED], p_tree, p_lr, n_classes, k)
    t.meta[M_MIX_SCORED] += 1
    if refit_due(t.meta[M_MIX_SCORED]):
        a, b, c = mix_fit(
            t.mix_a,
            t.mix_b,
            t.mix_y,
            t.mix_u,
            t.meta[M_MIX_SCORED],
            n_classes,
            t.meta_f[F_MIX_A],
            t.meta_f[F_MIX_B],
            t.meta_f[F_MIX_C],
        )
        t.meta_f[F_MIX_A] = a
        t.meta_f[F_MIX_B] = b
        t.meta_f[F_MIX_C] = c
    lr_learn(
        t.lr_w, t.lr_bias, t.lr_scale, z, num_row, n_numeric, n_classes, k, p_lr, z[n_numeric:]
    )  # p_lr: this example's
    return served
