"""Room for a tree to grow, within its memory budget (``max_bytes``).

A tree's arrays (:mod:`streamtree.state`) grow in Python between kernel calls: before a batch,
to the registry's classes, columns and values (:func:`fit_shapes`), and when the learning loop
stops with ``GROW`` before a row that may need more nodes or slots (:func:`grow_for_row`).

Nodes and slots are checked at that second point: with
``b(N, M, K, F, C, V)`` the bytes of the arrays at capacities of ``N`` nodes, ``M`` slots, ``K``
classes, ``F`` numeric and ``C`` nominal columns and ``V`` value codes (:func:`~streamtree.state.nbytes`),
the tree grows when ``b`` after growing is at most ``max_bytes``, and otherwise stops growing
for good, as at ``max_nodes``: every leaf keeps counting, the split statistics are let go
(:func:`stop_growth`) and it never asks for room again.

Classes, columns and values grow every slot's statistics, so they are checked too: a model
refuses an example (or batch) whose sizes would take a tree's arrays other than its nodes'
past ``max_bytes`` even stopped (:func:`budget_error`, before anything changes), and
:func:`fit_within` stops a tree before a fit that would pass it with its slots. The refusal
leaves the nodes out so that it depends on the sizes alone, not on how many nodes grew before:
an example refused one at a time is refused in any batch, and a log of accepted examples is
accepted again whatever batches it is replayed in (a service's restart). Nodes grown before
new classes came keep a count per class each: those counts are what the budget does not
bound (nodes grow only within it, at the classes of their time). A batch is learned in parts
cut where the capacities of its rows' sizes grow (:func:`capacity_cuts`), so it fits, and
stops, at the rows one example at a time does.

So that the same rows give the same tree whatever the batch boundaries, ``K, F, C, V`` are not
the arrays' own (a batch makes room for all its rows' classes and values before its first
row): they are the capacities of the sizes the rows learned up to and including the growing
row imply (:class:`Sizes`), which one example at a time are the arrays' own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from streamtree.features import FeatureRegistry
from streamtree.state import (
    M_CLASSES,
    M_FREE,
    M_NODES,
    M_NOMINAL,
    M_NUMERIC,
    M_OVER_BUDGET,
    M_STOPPED,
    M_VALUES,
    SLOT,
    TreeArrays,
    capacities,
    empty_slots,
    grow,
    grown_capacities,
    nbytes,
)

__all__ = [
    "Sizes",
    "budget_error",
    "capacity_cuts",
    "describe_stop",
    "fit_shapes",
    "fit_within",
    "grow_for_row",
    "like",
    "registry_sizes",
    "stop_growth",
]

#: The capacities of empty arrays (:func:`streamtree.state.new_arrays`) along the class,
#: numeric, nominal and value axes: capacities double from them.
_FIRST = (2, 1, 1, 1)


class Sizes(NamedTuple):
    """The rows of a batch being learned, and the registry's sizes before it: what the
    sizes are at any of its rows (:meth:`at`).

    ``before`` is ``(numeric columns, nominal columns, value codes)`` before the batch;
    ``num``, ``nom`` and ``ks`` are the batch's encoded rows and class ids. A model hands
    ``(before, num, nom, ks)`` to ``TreeState.resolve``, ``before`` ``None`` when the
    registry did not grow in the batch (its sizes are then the tree's).
    """

    before: tuple[int, int, int]
    num: np.ndarray
    nom: np.ndarray
    ks: np.ndarray

    def at(self, row: int, known_classes: int) -> tuple[int, int, int, int]:
        """``(K, F, C, V)`` once row ``row`` is registered: features and codes are numbered in
        order of first appearance, so ``F`` is one past the last numeric column present in
        rows ``0..row`` (at least ``before``'s), likewise ``C``, ``V`` one past the largest
        code, and ``K`` one past row ``row``'s class id (at least ``known_classes``)."""
        f0, c0, v0 = self.before
        num, nom = self.num[: row + 1], self.nom[: row + 1]
        present = np.flatnonzero(~np.isnan(num).all(axis=0)) if num.size else np.zeros(0, dtype=np.int64)
        f = max(f0, int(present[-1]) + 1 if present.size else 0)
        present = np.flatnonzero((nom >= 0).any(axis=0)) if nom.size else np.zeros(0, dtype=np.int64)
        c = max(c0, int(present[-1]) + 1 if present.size else 0)
        v = max(v0, int(nom.max()) + 1 if nom.size else 0)
        return max(known_classes, int(self.ks[row]) + 1), f, c, v


def _running_columns(present: np.ndarray, before: int) -> np.ndarray:
    """Per row, one past the last column ``present`` in that row or an earlier one (at least ``before``)."""
    n = present.shape[0]
    out = np.full(n + 1, before, dtype=np.int64)
    cols = np.flatnonzero(present.any(axis=0)) if present.size else np.zeros(0, dtype=np.int64)
    np.maximum.at(out, present[:, cols].argmax(axis=0), cols + 1)
    return np.maximum.accumulate(out[:n])


def capacity_cuts(before: tuple[int, int, int], num: np.ndarray, nom: np.ndarray, classes: np.ndarray) -> list[int]:
    """The rows (after the first) of a batch at which the capacities of the sizes its rows
    imply (:meth:`Sizes.at`; ``classes``: the number of classes at each row) grow: one
    example at a time, the arrays are fitted there, and :func:`fit_within` may stop the tree.
    A batch learned in parts cut at these rows fits as often, at the same rows."""
    if len(classes) < 2:
        return []
    sizes = np.stack(
        [
            classes,
            _running_columns(~np.isnan(num), before[0]),
            _running_columns(nom >= 0, before[1]),
            np.maximum.accumulate(np.maximum(nom.max(axis=1) + 1 if nom.shape[1] else 0 * classes, before[2])),
        ],
        axis=1,
    )
    first = np.array(_FIRST)
    doublings = np.ceil(np.log2(np.maximum(sizes, first) / first))
    return (np.flatnonzero((doublings[1:] != doublings[:-1]).any(axis=1)) + 1).tolist()  # type: ignore[no-any-return]


def registry_sizes(t: TreeArrays) -> tuple[int, int, int]:
    """``(numeric columns, nominal columns, value codes)`` the tree was last fitted to."""
    return int(t.meta[M_NUMERIC]), int(t.meta[M_NOMINAL]), int(t.meta[M_VALUES])


def fit_shapes(t: TreeArrays, registry: FeatureRegistry, n_classes: int, first_values: dict[int, float]) -> TreeArrays:
    """Room for ``n_classes`` classes and every column and value code of ``registry``, its
    logical sizes in ``meta``, and each new numeric column's shift (its first value)."""
    t = grow(t, classes=n_classes, numeric=registry.n_numeric, nominal=registry.n_nominal, values=registry.max_values)
    t.meta[M_NUMERIC] = registry.n_numeric
    t.meta[M_NOMINAL] = registry.n_nominal
    t.meta[M_VALUES] = registry.max_values
    for col, value in first_values.items():
        t.shift[col] = value
    return t


def _fitted_bytes(t: TreeArrays, shapes: tuple[int, ...]) -> int:
    """The bytes of ``t``'s arrays once fitted to ``shapes`` (classes, numeric and nominal
    columns, value codes; :func:`fit_shapes`) with its slots."""
    k, f, c, v = shapes
    caps = grown_capacities(t, classes=k, numeric=f, nominal=c, values=v)
    return nbytes(caps, t.nb_seen.shape[0] > 0, t.mix_y.shape[0] > 0)


def budget_error(t: TreeArrays, max_bytes: int, shapes: tuple[int, ...]) -> str | None:
    """Why ``t`` cannot be fitted to ``shapes`` within ``max_bytes`` even with its growth
    stopped, its nodes left out (one slot, the naive-Bayes and linear arrays: a function of
    the sizes alone, module docstring), or ``None`` when it can. The caller refuses the
    example, before anything changes."""
    k, f, c, v = shapes
    caps = grown_capacities(t, classes=k, numeric=f, nominal=c, values=v)
    need = nbytes((0, 1, *caps[2:]), t.nb_seen.shape[0] > 0, t.mix_y.shape[0] > 0)
    if need <= max_bytes:
        return None
    _, _, k, f, c, v = capacities(t)
    k2, f2, c2, v2 = caps[2:]
    what = [
        w for w, grows in (("a new class", k2 > k), ("new features", f2 > f or c2 > c), ("new values", v2 > v)) if grows
    ]
    return (
        f"Learning this would take a tree's arrays to {need:,} bytes besides its nodes' "
        f"({', '.join(what) or 'its present size'}, with growth stopped), past its memory budget "
        f"max_bytes={max_bytes:,}; nothing was learned."
    )


def fit_within(t: TreeArrays, max_bytes: int | None, shapes: tuple[int, ...] | None) -> TreeArrays:
    """``t`` stopped (:func:`stop_growth`) when fitting it to ``shapes`` with its slots would
    take its arrays past ``max_bytes`` (it fits with growth stopped: :func:`budget_error`
    was checked), else ``t`` itself; before :func:`fit_shapes`. ``shapes`` ``None``: as it is
    (a new background tree, made at the tree's capacities)."""
    shapes = capacities(t)[2:] if shapes is None else shapes
    if max_bytes is None or t.meta[M_OVER_BUDGET] or _fitted_bytes(t, shapes) <= max_bytes:
        return t
    return stop_growth(t)


def like(empty: TreeArrays, t: TreeArrays) -> TreeArrays:
    """An empty tree (``empty``) with ``t``'s capacities of classes, columns and values, its
    logical sizes of them and its shifts (a background tree's start)."""
    _, _, k, f, c, v = capacities(t)
    out = grow(empty, classes=k, numeric=f, nominal=c, values=v)
    for i in (M_CLASSES, M_NUMERIC, M_NOMINAL, M_VALUES):
        out.meta[i] = t.meta[i]
    out.shift[:f] = t.shift
    return out


def _doubled(first: int, size: int) -> int:
    cap = first
    while cap < size:
        cap *= 2
    return cap


def grow_for_row(t: TreeArrays, room: int, max_bytes: int | None, sizes: Sizes | None, row: int) -> TreeArrays:
    """``t`` with room for ``room`` more nodes and slots before row ``row`` of the batch
    (``sizes``), or, when that would take its arrays past ``max_bytes`` (module docstring),
    ``t`` stopped (:func:`stop_growth`). A stopped tree is returned as it is."""
    if t.meta[M_OVER_BUDGET]:
        return t
    nodes = int(t.meta[M_NODES]) + room
    if max_bytes is not None and sizes is not None and not t.meta[M_STOPPED]:  # stopped at max_nodes: as before
        n_cap, m_cap = grown_capacities(t, nodes=nodes, slots=room)[:2]
        k, f, c, v = sizes.at(row, int(t.meta[M_CLASSES]))
        caps = (
            n_cap,
            m_cap,
            _doubled(_FIRST[0], k),
            _doubled(_FIRST[1], f),
            _doubled(_FIRST[2], c),
            _doubled(_FIRST[3], v),
        )
        if nbytes(caps, t.nb_seen.shape[0] > 0, t.mix_y.shape[0] > 0) > max_bytes:
            return stop_growth(t)
    return grow(t, nodes=nodes, slots=room)


def stop_growth(t: TreeArrays) -> TreeArrays:
    """``t`` no longer growing, for its memory budget: no leaf keeps split statistics, the
    slot arrays shrink to one free slot, and ``meta`` says so (``M_STOPPED``, ``M_OVER_BUDGET``).
    Leaves go on counting; the kernels never ask such a tree for room again."""
    n = int(t.meta[M_NODES])
    node = t.node.copy()
    node[:n, SLOT] = -1
    _, _, k_cap, f_cap, c_cap, v_cap = capacities(t)
    meta = t.meta.copy()
    meta[M_FREE] = 1
    meta[M_STOPPED] = 1
    meta[M_OVER_BUDGET] = 1
    return t._replace(node=node, meta=meta, **empty_slots(1, f_cap, c_cap, v_cap, k_cap))


def describe_stop(trees: Sequence[TreeArrays]) -> str | None:
    """Why growth stopped in the first stopped tree of ``trees``: ``"max_bytes"``,
    ``"max_nodes"`` (or ``None``: none stopped)."""
    for t in trees:
        if t.meta[M_STOPPED]:
            return "max_bytes" if t.meta[M_OVER_BUDGET] else "max_nodes"
    return None
