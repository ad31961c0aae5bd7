"""``serve_to_learn``: ``serve``'s bits, and what it keeps for ``learn_linear`` the bits that
``learn_linear`` would compute itself (``tree_proba``, ``standardise``, ``lr_proba``)."""

from __future__ import annotations

import numpy as np
import pytest

from streamtree import ProbabilityTree
from streamtree.encoding import encode_for_prediction
from streamtree.kernels.linear import lr_proba, standardise
from streamtree.kernels.linear_step import serve_to_learn
from streamtree.kernels.predict import proba_at, tree_proba
from streamtree.kernels.route import route
from streamtree.state import F_GAMMA, F_MIX_A, F_MIX_B, F_MIX_C, F_THETA0, M_CLASSES, M_NUMERIC
from tests.test_linear import linear_stream


@pytest.mark.parametrize("config", [{}, {"naive_bayes": True}, {"linear": False}, {"smoothing": "mle"}])
def test_serve_to_learn_gives_serves_bits_and_keeps_learn_linears(config: dict) -> None:
    data = linear_stream(2500, seed=3)
    model = ProbabilityTree(grace_period=20, refit_every=60, **config)
    for x, y in data[:2000]:
        model.learn_one(x, y)
    state = model.state
    t = state.tree
    meta, meta_f = t.meta, t.meta_f
    linear = config.get("linear", True)
    if linear:  # the pool is not the tree alone: serve pools with the regression
        assert (meta_f[F_MIX_A], meta_f[F_MIX_B], meta_f[F_MIX_C]) != (1.0, 0.0, 0.0)
    if config.get("naive_bayes"):
        assert meta_f[F_GAMMA] != 0.0  # and tempers
    handle = state.handle(t)
    num, nom = encode_for_prediction(model.registry, [x for x, _ in data[2000:]])
    k, n_numeric = int(meta[M_CLASSES]), int(meta[M_NUMERIC])
    width = max(t.counts.shape[1], 3 * t.lr_scale.shape[0], 1)
    path = np.empty(t.node.shape[0], dtype=np.int64)
    for r in range(num.shape[0]):
        length = route(t.node, t.thr, num[r], nom[r], path)
        want, smoothed, loglik = (np.full(width, np.nan) for _ in range(3))
        proba_at(handle, state.cfg_i, state.cfg_f, path, length, num[r], nom[r], want, smoothed, loglik)
        out, p_tree, p_lr, z, pooled = (np.full(width, np.nan) for _ in range(5))
        kept = serve_to_learn(
            handle, state.cfg_i, state.cfg_f, path, length, num[r], nom[r], out, p_tree, p_lr, z, pooled, loglik
        )
        assert out[:k].tobytes() == want[:k].tobytes()
        expected = np.full(width, np.nan)
        tree_proba(state.cfg_i, state.cfg_f, t.counts, t.hgs, meta_f[F_THETA0], path, length, k, expected)
        assert p_tree[:k].tobytes() == expected[:k].tobytes()
        assert kept == linear
        if kept:
            expected_z, expected_lr = np.full(width, np.nan), np.full(width, np.nan)
            standardise(t.lr_scale, num[r], n_numeric, expected_z)
            lr_proba(t.lr_w, t.lr_bias, expected_z, n_numeric, k, expected_lr)
            assert z[:n_numeric].tobytes() == expected_z[:n_numeric].tobytes()
            assert p_lr[:k].tobytes() == expected_lr[:k].tobytes()
