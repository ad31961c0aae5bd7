"""What a tree's arrays must satisfy before a compiled kernel reads them.

The kernels index arrays by values the arrays hold (a node's children and column, a leaf's
slot, the free-slot stack, the class of a scored example, the logical sizes in ``meta``) and,
compiled, check no bounds. Arrays built by the library satisfy all of it by construction;
arrays read from a file are checked here first (:func:`streamtree.persistence.restore`), so a
corrupt or hand-edited file is refused with a ``ValueError`` naming what is wrong (a
:class:`~streamtree.exceptions.FormatError` to the caller), never a crash of the interpreter.

The checks are what the kernels need to stay in bounds, not a proof that the numbers are
those learning would have given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamtree.state import (
    A_CLOCK,
    A_MAX_BUCKETS,
    A_N_ROWS,
    ADWIN_ROWS,
    COL,
    D_N_EVENTS,
    DEPTH,
    KIND,
    LEAF,
    LEFT,
    M_CLASSES,
    M_FREE,
    M_MIX_SCORED,
    M_NB_SCORED,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_VALUES,
    NOMINAL,
    NUMERIC,
    PARENT,
    RIGHT,
    SLOT,
    DriftArrays,
    TreeArrays,
)

__all__ = ["check_capacities", "check_classes", "check_count", "check_drift", "check_tree", "check_values"]

#: A saved capacity may exceed the saved logical size by this factor plus :data:`SLACK` (the
#: library's capacities double, so at most twice it): more is a file asking for memory it
#: never held.
GROWTH = 4
SLACK = 1024


def check_capacities(capacity: list[int], shapes: list[int], name: str) -> None:
    """``capacity`` (nodes, classes, numeric and nominal columns, values) of tree ``name``
    within :data:`GROWTH` times the saved arrays' ``shapes`` plus :data:`SLACK`."""
    if len(capacity) != len(shapes):
        raise ValueError(f"{name}: {len(capacity)} capacities, not {len(shapes)}")
    for axis, (cap, saved) in enumerate(zip(capacity, shapes, strict=True)):
        if not saved <= int(cap) <= GROWTH * saved + SLACK:
            raise ValueError(f"{name}: capacity {cap} of axis {axis} for {saved} saved entries")


def check_tree(t: TreeArrays, n_classes: int, n_numeric: int, n_nominal: int, name: str = "tree") -> None:
    """Raise ``ValueError`` unless every index the kernels read from ``t`` is in bounds, for a
    model of ``n_classes`` classes and ``n_numeric``, ``n_nominal`` registered features."""
    meta = t.meta
    n, k = int(meta[M_NODES]), int(meta[M_CLASSES])
    f, c, v = int(meta[M_NUMERIC]), int(meta[M_NOMINAL]), int(meta[M_VALUES])
    _within(name, "nodes", n, 1, t.node.shape[0])
    _within(name, "classes", k, 0, min(n_classes, t.counts.shape[1], t.inherited.shape[1]))
    _within(name, "numeric columns", f, 0, min(n_numeric, t.shift.shape[0], t.num_stats.shape[1]))
    _within(name, "nominal columns", c, 0, min(n_nominal, t.nom_stats.shape[1]))
    _within(name, "values", v, 0, t.nom_stats.shape[2])
    slots = t.slot_seen.shape[0]
    _within(name, "free slots", int(meta[M_FREE]), 0, min(t.free_slots.shape[0], slots))
    for counter in (M_MIX_SCORED, M_NB_SCORED):
        _within(name, f"meta[{counter}]", int(meta[counter]), 0, np.iinfo(np.int64).max)
    node = t.node[:n]
    ids = np.arange(n)
    parent, left, right, kind = node[:, PARENT], node[:, LEFT], node[:, RIGHT], node[:, KIND]
    # nodes are appended as they are created: a parent comes before its children, so a path
    # ends within n steps
    if parent[0] != -1 or (n > 1 and not ((parent[1:] >= 0) & (parent[1:] < ids[1:])).all()):
        raise ValueError(f"{name}: a node's parent is not an earlier node")
    if not np.isin(kind, (LEAF, NUMERIC, NOMINAL)).all():
        raise ValueError(f"{name}: a node of unknown kind")
    leaf = kind == LEAF
    if not ((left[leaf] == -1) & (right[leaf] == -1)).all():
        raise ValueError(f"{name}: a leaf with children")
    inner = ~leaf
    for child in (left[inner], right[inner]):
        if not ((child > ids[inner]) & (child < n)).all() or not (parent[child] == ids[inner]).all():
            raise ValueError(f"{name}: a split's child is not a later node that names it its parent")
    if node[0, DEPTH] != 0 or (n > 1 and not (node[1:, DEPTH] == node[parent[1:], DEPTH] + 1).all()):
        raise ValueError(f"{name}: a node's depth is not its parent's plus one")
    width = np.where(kind == NUMERIC, f, c)
    if not ((node[inner, COL] >= 0) & (node[inner, COL] < width[inner])).all():
        raise ValueError(f"{name}: a split on a column the tree does not have")
    if not ((node[:, SLOT] >= -1) & (node[:, SLOT] < slots)).all():
        raise ValueError(f"{name}: a leaf's slot is not one of the {slots} slots")
    free = t.free_slots[: int(meta[M_FREE])]
    if not ((free >= 0) & (free < slots)).all():
        raise ValueError(f"{name}: the free-slot stack names a slot that does not exist")
    for scored, width_k in ((t.mix_y, t.mix_a.shape[1]), (t.nb_y, t.nb_a.shape[1])):
        if scored.shape[0] and not ((scored >= 0) & (scored < max(width_k, 1))).all():
            raise ValueError(f"{name}: a scored example's class is not one of the model's")
    check_values(t, name)


#: Float arrays a prediction reads and learning keeps finite whatever the values learned (the
#: split and naive-Bayes statistics are left out: their sums may overflow on values near the
#: float range, and prediction does not read them).
_FINITE = ("counts", "inherited", "hgs", "thr", "lr_w", "lr_bias")
#: Arrays of counts (weights of examples), never negative.
_COUNTS = ("counts", "inherited")


def check_values(t: TreeArrays, name: str = "tree") -> None:
    """Raise ``ValueError`` unless the floats of ``t`` a prediction reads, and learning keeps
    finite, are (:data:`_FINITE`), and its counts are not negative: a NaN or infinite one
    would be served as NaN probabilities."""
    for field in _FINITE:
        if not np.isfinite(getattr(t, field)).all():
            raise ValueError(f"{name}: {field} holds a value that is not a finite number")
    for field in _COUNTS:
        if (getattr(t, field) < 0).any():
            raise ValueError(f"{name}: {field} holds a negative count")


def check_classes(saved: Any) -> list[Any]:
    """A saved list of classes: distinct labels (str, int or bool); ``ValueError`` for
    anything else (two equal classes would leave a class id no label maps to, served with a
    share of the probability)."""
    classes = list(saved)
    if not all(type(c) in (str, int, bool) for c in classes):
        raise ValueError(f"classes must be labels (str, int or bool), not {classes!r}")
    if len(set(classes)) != len(classes):
        raise ValueError(f"classes are not distinct: {classes!r}")
    return classes


def check_count(saved: Any) -> int:
    """A saved count of examples: an int in ``[0, 2**63)`` (the kernels keep it in an int64);
    ``ValueError`` (or ``OverflowError``, for an infinite float) for anything else."""
    n = int(saved)
    _within("header", "n_examples", n, 0, np.iinfo(np.int64).max)
    return n


def check_drift(d: DriftArrays) -> None:
    """Raise ``ValueError`` unless the change detector's sizes and counters are in bounds."""
    rows, buckets = d.adwin_b.shape[0], d.adwin_b.shape[1]
    if rows != ADWIN_ROWS or d.adwin_n.shape != (ADWIN_ROWS,):
        raise ValueError(f"drift: the detector has {rows} rows, not {ADWIN_ROWS}")
    _within("drift", "buckets a row", int(d.adwin_s[A_MAX_BUCKETS]), 1, buckets - 1)
    _within("drift", "rows in use", int(d.adwin_s[A_N_ROWS]), 1, rows)
    _within("drift", "clock", int(d.adwin_s[A_CLOCK]), 1, np.iinfo(np.int64).max)
    if not ((d.adwin_n >= 0) & (d.adwin_n <= buckets)).all():
        raise ValueError("drift: a row of the detector holds more buckets than it has")
    _within("drift", "events", int(d.drift_s[D_N_EVENTS]), 0, d.drift_ev.shape[0])


def _within(name: str, what: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name}: {what} {value}, not within [{low}, {high}]")
