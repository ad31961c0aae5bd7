"""A tree's (or a detector's) arrays as one compiled object, handed to kernels in one piece.

A *handle* is a numba structref with one field per array, named as in
:class:`~streamtree.state.TreeArrays` (or :class:`~streamtree.state.DriftArrays`): a kernel
reads ``t.counts`` from it as it would from the named tuple. It holds references to the arrays,
not copies: what a kernel writes through it is in the arrays. A model makes a handle when it
gets a new set of arrays (a tree grown, a background tree adopted, a model loaded) and keeps it
beside them.

Why not the named tuple itself: numba unboxes every array argument on every call from Python
(about 50 ns each, 1.6 us for a tree's 31), and inside compiled code handing a tuple of arrays
to a function, or to an inlined one with branches, takes and releases a reference to each of
its arrays (two atomic operations each, which numba's reference-count pruning cannot remove
across branches). A handle is one object, one reference. Measured on SEA: a call at the entry
point took 1.58 us with the tuple and 0.17 us with a handle; a loop counting examples into a
one-leaf tree's statistics 0.13 us an example with the tuple and 0.025 with a handle; the
learning loop itself, everything optional off, 0.27 and 0.13; predicting a batch on SEA's
grown tree 0.43 us a row and 0.31.

Every tree's arrays have one type (float64 or int64, C-contiguous, writable:
:mod:`streamtree.state`), and so has its handle: one compiled specialisation of each kernel
serves every tree.
"""

from __future__ import annotations

from typing import Any

from numba import njit, typeof
from numba.core import types
from numba.experimental import structref

from streamtree.kernels.borrow import borrow
from streamtree.state import DriftArrays, TreeArrays, new_arrays, new_drift

__all__ = ["borrowed", "borrowed_drift", "drift_handle", "tree_handle"]


@structref.register
class HandleType(types.StructRef):
    """The numba type of a handle: one field per array."""


class Handle(structref.StructRefProxy):
    """A handle as Python holds it: opaque, only handed to kernels."""


def _fields(arrays: tuple[Any, ...]) -> list[tuple[str, Any]]:
    return [(name, typeof(a)) for name, a in zip(arrays._fields, arrays)]  # type: ignore[attr-defined]


TREE_HANDLE = HandleType(_fields(new_arrays(naive_bayes=True, linear=True)))
DRIFT_HANDLE = HandleType(_fields(new_drift(0.002)))
structref.define_boxing(HandleType, Handle)


@njit(cache=True)
def _tree_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(TREE_HANDLE)
    h.node = arrays[0]
    h.thr = arrays[1]
    h.counts = arrays[2]
    h.inherited = arrays[3]
    h.hgs = arrays[4]
    h.num_stats = arrays[5]
    h.num_range = arrays[6]
    h.nom_stats = arrays[7]
    h.slot_seen = arrays[8]
    h.free_slots = arrays[9]
    h.shift = arrays[10]
    h.nb_num = arrays[11]
    h.nb_range = arrays[12]
    h.nb_nom = arrays[13]
    h.nb_seen = arrays[14]
    h.nb_mean = arrays[15]
    h.nb_inv2var = arrays[16]
    h.nb_const = arrays[17]
    h.nb_table = arrays[18]
    h.nb_a = arrays[19]
    h.nb_b = arrays[20]
    h.nb_y = arrays[21]
    h.lr_w = arrays[22]
    h.lr_bias = arrays[23]
    h.lr_scale = arrays[24]
    h.mix_a = arrays[25]
    h.mix_b = arrays[26]
    h.mix_y = arrays[27]
    h.mix_u = arrays[28]
    h.meta = arrays[29]
    h.meta_f = arrays[30]
    return h


@njit(cache=True)
def _drift_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(DRIFT_HANDLE)
    h.adwin_b = arrays[0]
    h.adwin_n = arrays[1]
    h.adwin_s = arrays[2]
    h.drift_s = arrays[3]
    h.drift_ev = arrays[4]
    return h


@njit(cache=True)
def borrowed(h):  # type: ignore[no-untyped-def]
    """A handle of the same arrays, borrowed (:mod:`streamtree.kernels.borrow`): what a
    kernel's entry point hands its loop, so that reading ``t.counts`` and passing it on count
    no references. Valid while ``h`` is held (by the caller of the entry point)."""
    b = structref.new(TREE_HANDLE)
    b.node = borrow(h.node)
    b.thr = borrow(h.thr)
    b.counts = borrow(h.counts)
    b.inherited = borrow(h.inherited)
    b.hgs = borrow(h.hgs)
    b.num_stats = borrow(h.num_stats)
    b.num_range = borrow(h.num_range)
    b.nom_stats = borrow(h.nom_stats)
    b.slot_seen = borrow(h.slot_seen)
    b.free_slots = borrow(h.free_slots)
    b.shift = borrow(h.shift)
    b.nb_num = borrow(h.nb_num)
    b.nb_range = borrow(h.nb_range)
    b.nb_nom = borrow(h.nb_nom)
    b.nb_seen = borrow(h.nb_seen)
    b.nb_mean = borrow(h.nb_mean)
    b.nb_inv2var = borrow(h.nb_inv2var)
    b.nb_const = borrow(h.nb_const)
    b.nb_table = borrow(h.nb_table)
    b.nb_a = borrow(h.nb_a)
    b.nb_b = borrow(h.nb_b)
    b.nb_y = borrow(h.nb_y)
    b.lr_w = borrow(h.lr_w)
    b.lr_bias = borrow(h.lr_bias)
    b.lr_scale = borrow(h.lr_scale)
    b.mix_a = borrow(h.mix_a)
    b.mix_b = borrow(h.mix_b)
    b.mix_y = borrow(h.mix_y)
    b.mix_u = borrow(h.mix_u)
    b.meta = borrow(h.meta)
    b.meta_f = borrow(h.meta_f)
    return b


@njit(cache=True)
def borrowed_drift(h):  # type: ignore[no-untyped-def]
    """:func:`borrowed` for a detector's handle."""
    b = structref.new(DRIFT_HANDLE)
    b.adwin_b = borrow(h.adwin_b)
    b.adwin_n = borrow(h.adwin_n)
    b.adwin_s = borrow(h.adwin_s)
    b.drift_s = borrow(h.drift_s)
    b.drift_ev = borrow(h.drift_ev)
    return b


def tree_handle(t: TreeArrays) -> Any:
    """The handle of a tree's arrays (a kernel reads ``t.counts`` and the others from it).

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.kernels.learn import predict_rows
    >>> t = new_arrays()
    >>> t.counts[0, :2] = 3.0, 1.0
    >>> t.meta[2] = 2  # two classes known
    >>> from streamtree.kernels.learn import CONFIG_FLOATS, CONFIG_INTS
    >>> cfg_i, cfg_f = np.zeros(CONFIG_INTS, dtype=np.int64), np.zeros(CONFIG_FLOATS)
    >>> out = np.empty((1, t.counts.shape[1]))  # smoother code 0: the leaf's relative frequencies
    >>> predict_rows(tree_handle(t), cfg_i, cfg_f, np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64), out)
    >>> out.round(3).tolist()
    [[0.75, 0.25]]
    """
    return _tree_handle(tuple(t))


def drift_handle(d: DriftArrays) -> Any:
    """The handle of a detector's arrays (a kernel reads ``d.adwin_s`` and the others from it)."""
    return _drift_handle(tuple(d))
