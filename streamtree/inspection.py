"""What a tree model shows of itself: summary, explanations, the tree as data, the drift
history. Every function here only reads: a model's :class:`~streamtree.tree_state.TreeState`
(its arrays, smoother and kernel configuration) and what it knows besides (:class:`Shown`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

import numpy as np

from streamtree.encoding import encode_one
from streamtree.features import FeatureRegistry
from streamtree.growth import describe_stop
from streamtree.kernels.codes import C_LINEAR, C_NB
from streamtree.kernels.linear import lr_proba_row, uncertainty
from streamtree.kernels.naive_bayes import nb_loglik
from streamtree.kernels.predict import proba_at, tree_proba
from streamtree.kernels.route import route
from streamtree.state import (
    COL,
    D_ACTIVE,
    D_COMPARED,
    D_DETECTIONS,
    D_DROPPED,
    D_GAP,
    D_N_EVENTS,
    D_SWAPS,
    D_TREE_SINCE,
    DEPTH,
    F_GAMMA,
    F_MIX_A,
    F_MIX_B,
    F_MIX_C,
    F_THETA0,
    KIND,
    LEAF,
    LEFT,
    M_CLASSES,
    M_EXAMPLES,
    M_MIX_SCORED,
    M_NB_CLASSES,
    M_NB_NOMINAL,
    M_NB_NUMERIC,
    M_NB_SCORED,
    M_NB_VALUES,
    M_NODES,
    M_NUMERIC,
    M_STOPPED,
    PARENT,
    RIGHT,
    TreeArrays,
)
from streamtree.tree_state import TreeState
from streamtree.typing import ClassLabel
from streamtree.values import NUMERIC

__all__ = ["Shown", "drift_summary", "explain", "limit_gauges", "limit_notes", "summary", "tree_as_data"]

EVENT_NAMES = ("detection", "swap", "dropped")

OFF: dict[str, Any] = {
    "detection": False,
    "n_detections": 0,
    "n_swaps": 0,
    "n_dropped": 0,
    "tree_since": 0,
    "background": None,
    "events": [],
}
"""The drift summary of a tree with change detection off."""


class Shown(Protocol):
    """What these functions read of a tree model (a
    :class:`~streamtree.tree.ProbabilityTree`): its state, features, classes and example count,
    and the parameters a summary shows."""

    state: TreeState
    registry: FeatureRegistry
    classes_: list[ClassLabel]
    n_examples: int
    smoothing: str
    max_nodes: int
    max_bytes: int | None
    max_categories: int | None
    naive_bayes: bool
    linear: bool


def memory_bytes(t: TreeArrays | None) -> int:
    """Bytes the tree's arrays occupy (their capacity: what the process really holds)."""
    return 0 if t is None else int(sum(a.nbytes for a in t))


def limit_notes(
    registry: FeatureRegistry,
    max_categories: int | None,
    stops: dict[str, int],
    limits: dict[str, Any],
    n_trees: int | None = None,
) -> list[str]:
    """One line a user can read for each limit the model met: each nominal feature some of
    whose values went to *other* (``max_categories``), and growth stopped at a limit
    (``stops``: how many trees stopped at each, of ``n_trees`` for a forest; ``limits``: their
    values)."""
    notes = [
        f"Feature {name!r} has more than max_categories={max_categories} values: {n:,} examples' values "
        f"beyond its first {max_categories} share its 'other' code."
        for name, n in registry.overflow().items()
    ]
    at = {"max_nodes": "at max_nodes={:,}", "max_bytes": "rather than pass max_bytes={:,}"}
    for reason, n in stops.items():
        who = "The tree" if n_trees is None else f"{n} of {n_trees} trees"
        notes.append(
            f"{who} stopped growing {at[reason].format(limits[reason])}: leaves keep counting, without "
            "split statistics."
        )
    return notes


def limit_gauges(summary: Mapping[str, Any]) -> dict[str, float]:
    """A model's limits as gauges, from its ``summary()`` (a tree's or a forest's): the bytes
    its arrays hold, the examples whose value went to *other* (all features), and the trees
    that stopped growing rather than pass ``max_bytes``."""
    stop = summary.get("growth_stop")
    stopped = stop.get("max_bytes", 0) if isinstance(stop, dict) else int(stop == "max_bytes")
    return {
        "memory_bytes": float(summary.get("memory_bytes", 0)),
        "other_values": float(sum(summary.get("other_values", {}).values())),
        "budget_stops": float(stopped),
    }


def summary(model: Shown) -> dict[str, Any]:
    """Size and state of the model as JSON-able data. ``other_values`` counts, per nominal
    feature, the examples whose value went to its *other* code (``max_categories``);
    ``growth_stop`` is the limit growth stopped at (``"max_nodes"``, ``"max_bytes"`` or
    ``None``); ``notes`` says both in words."""
    state = model.state
    t = state.tree
    n = int(t.meta[M_NODES])
    stop = describe_stop([t])
    out: dict[str, Any] = {
        "n_nodes": n,
        "n_leaves": int((t.node[:n, KIND] == LEAF).sum()),
        "depth": int(t.node[:n, DEPTH].max()),
        "n_examples": model.n_examples,
        "classes": list(model.classes_),
        "n_features": len(model.registry.names),
        "smoothing": model.smoothing,
        "growth_stopped": bool(t.meta[M_STOPPED]),
        "growth_stop": stop,
        "memory_bytes": memory_bytes(t)
        + memory_bytes(state.background)
        + (int(sum(a.nbytes for a in state.drift)) if state.drift is not None else 0),
        "max_bytes": model.max_bytes,
        "max_categories": model.max_categories,
        "other_values": model.registry.overflow(),
        "notes": limit_notes(
            model.registry,
            model.max_categories,
            {stop: 1} if stop else {},
            {"max_nodes": model.max_nodes, "max_bytes": model.max_bytes},
        ),
        "drift": drift_summary(state),
    }
    extra = state.smoother.summary(t)
    if extra is not None:
        out[state.smoother.name] = extra
    if model.naive_bayes:
        out["naive_bayes"] = {"gamma": float(t.meta_f[F_GAMMA]), "n_scored": int(t.meta[M_NB_SCORED])}
    if model.linear:
        out["linear"] = {
            "a": float(t.meta_f[F_MIX_A]),
            "b": float(t.meta_f[F_MIX_B]),
            "c": float(t.meta_f[F_MIX_C]),
            "n_scored": int(t.meta[M_MIX_SCORED]),
        }
    return out


def drift_summary(state: TreeState) -> dict[str, Any]:
    """Detected changes, the background tree and swaps, as JSON-able data."""
    d = state.drift
    if d is None:
        return dict(OFF)
    s = d.drift_s
    background = state.background
    compared = int(s[D_COMPARED])
    return {
        "detection": True,
        "n_detections": int(s[D_DETECTIONS]),
        "n_swaps": int(s[D_SWAPS]),
        "n_dropped": int(s[D_DROPPED]),
        "tree_since": int(s[D_TREE_SINCE]),
        "background": None
        if background is None or s[D_ACTIVE] == 0.0
        else {
            "n_examples": int(background.meta[M_EXAMPLES]),
            "n_nodes": int(background.meta[M_NODES]),
            "compared": compared,
            "mean_log_loss_gain": float(s[D_GAP]) / compared if compared else None,
        },
        "events": [
            {"event": EVENT_NAMES[int(kind)], "at": int(at)} for kind, at in d.drift_ev[: int(s[D_N_EVENTS])].tolist()
        ],
    }


def _split_description(model: Shown, node: int) -> dict[str, Any] | None:
    t = model.state.tree
    kind = int(t.node[node, KIND])
    if kind == LEAF:
        return None
    col = int(t.node[node, COL])
    feature = model.registry.feature_of(kind, col)
    if kind == NUMERIC:
        return {"feature": feature, "operator": "<=", "value": float(t.thr[node])}
    values, code = model.registry.values[col], int(t.thr[node])
    if code == len(values):  # the feature's other code: every value beyond its first max_categories
        return {"feature": feature, "operator": "==", "value": None, "other": True}
    return {"feature": feature, "operator": "==", "value": values[code]}


def explain(model: Shown, x: Mapping[Hashable, Any]) -> dict[str, Any]:
    """See :meth:`ProbabilityTree.explain_one`."""
    state = model.state
    t = state.tree
    cfg_i, cfg_f = state.cfg_i, state.cfg_f
    k = len(model.classes_)
    values, codes = encode_one(model.registry, x)
    num = np.array(values, dtype=np.float64)
    nom = np.array(codes, dtype=np.int64)
    path_array = np.empty(int(t.meta[M_NODES]), dtype=np.int64)
    length = route(t.node, t.thr, num, nom, path_array)
    path = path_array[:length].tolist()
    counts = t.counts[path, :k]
    totals = counts.sum(axis=1)
    alpha, alpha0 = state.smoother.weights(t)
    shares: list[float | None] = [None] * len(path)
    prior_share = None
    if alpha is not None and alpha0 is not None and k:
        # ancestors weigh alpha (0 without counts), the node itself its own count
        weights = [float(alpha[p]) if totals[i] > 0 else 0.0 for i, p in enumerate(path[:-1])]
        weights.append(float(totals[-1]))
        z = sum(weights) + alpha0
        if z > 0:
            shares = [w / z for w in weights]
            prior_share = alpha0 / z
    smoothed: dict[Any, float] = {}
    proba: dict[Any, float] = {}
    factor = None
    linear = None
    if k:
        out, untempered, loglik, own = np.empty(k), np.empty(k), np.empty(k), np.empty(k)
        proba_at(state.handle(t), cfg_i, cfg_f, path_array, length, num, nom, out, untempered, loglik)
        tree_proba(cfg_i, cfg_f, t.counts, t.hgs, t.meta_f[F_THETA0], path_array, length, k, own)
        smoothed = dict(zip(model.classes_, own.tolist()))
        proba = dict(zip(model.classes_, out.tolist()))
        if cfg_i[C_NB]:
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
                num,
                nom,
                k,
                loglik,
            )
            factor = {"gamma": float(t.meta_f[F_GAMMA]), "loglik": dict(zip(model.classes_, loglik.tolist()))}
        if cfg_i[C_LINEAR]:
            n_numeric = int(t.meta[M_NUMERIC])
            regression = np.full(k, 1.0 / k)
            if n_numeric:
                lr_proba_row(t.lr_w, t.lr_bias, t.lr_scale, num, n_numeric, k, regression)
            b, c = float(t.meta_f[F_MIX_B]), float(t.meta_f[F_MIX_C])
            linear = {
                "a": float(t.meta_f[F_MIX_A]),
                "b": b,
                "c": c,
                "uncertainty": float(uncertainty(own, k)),
                "weight": b + c * float(uncertainty(own, k)),
                "regression": dict(zip(model.classes_, regression.tolist())),
                "pooled": dict(zip(model.classes_, untempered.tolist())),
            }
    nodes = [
        {
            "node": node,
            "depth": int(t.node[node, DEPTH]),
            "split": _split_description(model, node),
            "counts": dict(zip(model.classes_, counts[i].tolist())),
            "mle": dict(zip(model.classes_, (counts[i] / totals[i]).tolist())) if totals[i] > 0 else None,
            "alpha": float(alpha[node]) if alpha is not None and i < len(path) - 1 else None,
            "share": shares[i],
        }
        for i, node in enumerate(path)
    ]
    return {
        "path": nodes,
        "leaf": path[-1],
        "stopped_early": int(t.node[path[-1], KIND]) != LEAF,
        "prior_share": prior_share,
        "smoothed": smoothed,
        "naive_bayes": factor,
        "linear": linear,
        "proba": proba,
        "drift": drift_summary(state),
    }


def tree_as_data(model: Shown) -> dict[str, Any]:
    """The tree as plain data (lists), one entry per node."""
    t = model.state.tree
    n = int(t.meta[M_NODES])
    k = int(t.meta[M_CLASSES])
    alpha, alpha0 = model.state.smoother.weights(t)
    children = t.node[:n, [LEFT, RIGHT]]
    return {
        "classes": list(model.classes_),
        "parent": t.node[:n, PARENT].tolist(),
        "left": [c if c >= 0 else None for c in children[:, 0].tolist()],
        "right": [c if c >= 0 else None for c in children[:, 1].tolist()],
        "depth": t.node[:n, DEPTH].tolist(),
        "split": [_split_description(model, i) for i in range(n)],
        "counts": t.counts[:n, :k].tolist(),
        "alpha": None if alpha is None else alpha.tolist(),
        "prior_weight": alpha0,
    }
