"""A tree's (or a detector's) arrays as one compiled object, handed to a kernel in one piece.

numba unboxes every array argument on every call, about 50 ns each: for a tree's 31 arrays
and a detector's 5, 1.6 us a call, three times what predicting one row computes (measured on
SEA: 0.5 us). A *handle* is a numba structref holding the arrays' tuple; it is unboxed as one
object (measured: a kernel call at its entry point 1.58 us with the tuple of 31 arrays, 0.17 us
with their handle). A handle holds references to the arrays, not copies: what a kernel writes
through it is in the arrays. A model makes a handle when it gets a new set of arrays (a tree
grown, a background tree adopted, a model loaded) and keeps it beside them.

Every tree's arrays have one type (float64 or int64, C-contiguous, writable:
:mod:`streamtree.state`), and so have its tuple and handle: one compiled specialisation of
each kernel serves every tree.
"""

from __future__ import annotations

from typing import Any

from numba import njit, typeof
from numba.core import types
from numba.experimental import structref

from streamtree.state import DriftArrays, TreeArrays, new_arrays, new_drift

__all__ = ["drift_handle", "tree_handle"]


@structref.register
class HandleType(types.StructRef):
    """The numba type of a handle: one field, ``arrays``, the tuple of the arrays."""


class Handle(structref.StructRefProxy):
    """A handle as Python holds it: opaque, only handed to kernels."""


structref.define_boxing(HandleType, Handle)

TREE_HANDLE = HandleType([("arrays", typeof(tuple(new_arrays(naive_bayes=True, linear=True))))])
DRIFT_HANDLE = HandleType([("arrays", typeof(tuple(new_drift(0.002))))])


@njit(cache=True)
def _tree_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(TREE_HANDLE)
    h.arrays = arrays
    return h


@njit(cache=True)
def _drift_handle(arrays):  # type: ignore[no-untyped-def]
    h = structref.new(DRIFT_HANDLE)
    h.arrays = arrays
    return h


def tree_handle(t: TreeArrays) -> Any:
    """The handle of a tree's arrays (a kernel reads them as ``TreeArrays(*h.arrays)``).

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
    """The handle of a detector's arrays (read as ``DriftArrays(*h.arrays)``)."""
    return _drift_handle(tuple(d))
