"""A tree's (or a detector's) arrays as one compiled object, handed to kernels in one piece.

A *handle* is a numba structref with one field per array, named as in
:class:`~streamtree.state.TreeArrays` (or :class:`~streamtree.state.DriftArrays`): a kernel
reads ``t.counts`` from it as it would from the named tuple. Its fields are the arrays
themselves, not copies: what a kernel writes through it is in the arrays. They are
*borrowed* (:mod:`streamtree.kernels.borrow`): numba counts no references to them, and the
Python object of the handle holds the arrays instead (``handle.arrays``), so they live as
long as it does. A model makes a handle when it gets a new set of arrays (a tree grown, a
background tree adopted, a model loaded) and keeps it beside them; a forest's lists of its
members' handles (built by :mod:`streamtree.kernels.forest`) are brought up to date before
every call that reads them (:meth:`streamtree.members.MemberArrays.sync`). A kernel cannot return a handle's array to Python: it is typed borrowed.

Why not the named tuple itself: numba unboxes every array argument on every call from Python,
and inside compiled code handing a tuple of arrays to a function, or to an inlined one with
branches, takes and releases a reference to each of its arrays. A handle is one object, one
reference (what that gained: ``docs/decisions/compiled-core.md``, "Handles instead of 31
array arguments"). Who holds what, and for how long: ``docs/architecture/memory.md``.

Every tree's arrays have one type (float64 or int64, C-contiguous, writable:
:mod:`streamtree.state`), and so has its handle: one compiled specialisation of each kernel
serves every tree.
"""

from __future__ import annotations

from typing import Any

from numba import njit, typeof
from numba.core import types
from numba.experimental import structref

from streamtree.kernels.borrow import borrow, borrowed
from streamtree.state import DriftArrays, TreeArrays, new_arrays, new_drift

__all__ = ["drift_handle", "tree_handle"]


@structref.register
class HandleType(types.StructRef):
    """The numba type of a handle: one field per array."""


class Handle(structref.StructRefProxy):
    """A handle as Python holds it: opaque, only handed to kernels; ``arrays`` is what it
    points at, held for as long as the handle is."""

    __slots__ = ("arrays",)


def _fields(arrays: tuple[Any, ...]) -> list[tuple[str, Any]]:
    # each field is typed borrowed (streamtree.kernels.borrow): a kernel cannot return it to Python
    return [(name, borrowed(typeof(a))) for name, a in zip(arrays._fields, arrays)]  # type: ignore[attr-defined]


TREE_HANDLE = HandleType(_fields(new_arrays(naive_bayes=True, linear=True)))
DRIFT_HANDLE = HandleType(_fields(new_drift(0.002)))
structref.define_boxing(HandleType, Handle)


@njit(cache=True)
def _tree_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(TREE_HANDLE)
    h.node = borrow(arrays[0])
    h.thr = borrow(arrays[1])
    h.counts = borrow(arrays[2])
    h.inherited = borrow(arrays[3])
    h.hgs = borrow(arrays[4])
    h.num_stats = borrow(arrays[5])
    h.num_range = borrow(arrays[6])
    h.nom_stats = borrow(arrays[7])
    h.slot_seen = borrow(arrays[8])
    h.free_slots = borrow(arrays[9])
    h.shift = borrow(arrays[10])
    h.nb_num = borrow(arrays[11])
    h.nb_range = borrow(arrays[12])
    h.nb_nom = borrow(arrays[13])
    h.nb_seen = borrow(arrays[14])
    h.nb_mean = borrow(arrays[15])
    h.nb_inv2var = borrow(arrays[16])
    h.nb_const = borrow(arrays[17])
    h.nb_table = borrow(arrays[18])
    h.nb_a = borrow(arrays[19])
    h.nb_b = borrow(arrays[20])
    h.nb_y = borrow(arrays[21])
    h.lr_w = borrow(arrays[22])
    h.lr_bias = borrow(arrays[23])
    h.lr_scale = borrow(arrays[24])
    h.mix_a = borrow(arrays[25])
    h.mix_b = borrow(arrays[26])
    h.mix_y = borrow(arrays[27])
    h.mix_u = borrow(arrays[28])
    h.meta = borrow(arrays[29])
    h.meta_f = borrow(arrays[30])
    return h


@njit(cache=True)
def _drift_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(DRIFT_HANDLE)
    h.adwin_b = borrow(arrays[0])
    h.adwin_n = borrow(arrays[1])
    h.adwin_s = borrow(arrays[2])
    h.drift_s = borrow(arrays[3])
    h.drift_ev = borrow(arrays[4])
    return h


def tree_handle(t: TreeArrays) -> Any:
    """The handle of a tree's arrays (a kernel reads ``t.counts`` and the others from it).

    Examples
    --------
    >>> import numpy as np
    >>> from streamtree.kernels.predict import predict_rows
    >>> t = new_arrays()
    >>> t.counts[0, :2] = 3.0, 1.0
    >>> t.meta[2] = 2  # two classes known
    >>> from streamtree.kernels.codes import CONFIG_FLOATS, CONFIG_INTS
    >>> cfg_i, cfg_f = np.zeros(CONFIG_INTS, dtype=np.int64), np.zeros(CONFIG_FLOATS)
    >>> out = np.empty((1, t.counts.shape[1]))  # smoother code 0: the leaf's relative frequencies
    >>> predict_rows(tree_handle(t), cfg_i, cfg_f, np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64), out)
    >>> out.round(3).tolist()
    [[0.75, 0.25]]
    """
    handle = _tree_handle(tuple(t))
    handle.arrays = t  # the handle's arrays are borrowed: it holds them
    return handle


def drift_handle(d: DriftArrays) -> Any:
    """The handle of a detector's arrays (a kernel reads ``d.adwin_s`` and the others from it)."""
    handle = _drift_handle(tuple(d))
    handle.arrays = d
    return handle
