"""A handle holds a tree's arrays themselves: kernels write through it, and a model makes a
new one exactly when it gets new arrays."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np

from streamtree import ProbabilityTree
from streamtree.kernels.codes import CONFIG_FLOATS, CONFIG_INTS
from streamtree.kernels.event import event_handle, predict_event
from streamtree.kernels.handle import drift_handle, tree_handle
from streamtree.kernels.predict import predict_rows
from streamtree.state import M_CLASSES, new_arrays, new_drift


def test_a_kernel_reads_the_arrays_as_they_are_now() -> None:
    t = new_arrays()
    t.meta[M_CLASSES] = 2
    handle = tree_handle(t)
    cfg_i, cfg_f = np.zeros(CONFIG_INTS, dtype=np.int64), np.zeros(CONFIG_FLOATS)
    out = np.empty((1, t.counts.shape[1]))
    row, codes = np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64)
    t.counts[0, :2] = 1.0, 3.0  # written after the handle was made
    predict_rows(handle, cfg_i, cfg_f, row, codes, out)
    assert out[0, :2].tolist() == [0.25, 0.75]


def test_learning_through_the_handle_writes_the_models_arrays() -> None:
    model = ProbabilityTree()
    model.learn_one({"a": 1.0}, "x")
    counts = model.state.tree.counts
    model.learn_one({"a": 2.0}, "x")
    assert model.state.tree.counts is counts and counts[0, 0] == 2.0


def test_new_arrays_get_a_new_handle_and_the_old_one_is_let_go() -> None:
    model = ProbabilityTree(grace_period=10)
    model.learn_one({"a": 0.0}, "x")
    old = model.state.tree
    first = model.state.handle(old)
    assert model.state.handle(model.state.tree) is first  # the same arrays: the same handle
    for i in range(2000):
        model.learn_one({"a": float(i % 50)}, "xyz"[i % 50 % 3])
        if model.state.tree is not old:
            break
    assert model.state.tree is not old  # the tree outgrew its arrays: new ones
    assert model.state.handle(model.state.tree) is not first
    assert set(model.state.handles) <= {id(model.state.tree), id(model.state.drift)}


def _pointer(handle: object, name: str) -> tuple[int, tuple[int, ...]]:
    """The data pointer and shape of field ``name`` of a handle, as a kernel reads it (the
    field itself cannot come back to Python: it is borrowed)."""
    from numba import njit

    namespace: dict = {}
    exec(f"def read(h):\n    return h.{name}.ctypes.data, h.{name}.shape\n", namespace)
    return njit(namespace["read"])(handle)  # type: ignore[no-any-return]


def test_every_field_of_a_handle_is_the_array_of_that_name() -> None:
    t, d = new_arrays(nodes=5, naive_bayes=True, linear=True), new_drift(0.01)
    for arrays, handle in ((t, tree_handle(t)), (d, drift_handle(d))):
        for name, array in zip(arrays._fields, arrays):
            assert _pointer(handle, name) == (array.ctypes.data, array.shape), name


def _one_leaf_handle() -> tuple[Any, weakref.ref[np.ndarray]]:
    """The handle of a one-leaf tree of two classes (counts 1 and 3) and a weak reference to
    its counts, the arrays held by nothing else."""
    t = new_arrays()
    t.meta[M_CLASSES] = 2
    t.counts[0, :2] = 1.0, 3.0
    return tree_handle(t), weakref.ref(t.counts)


def test_a_handle_keeps_its_arrays_alive_and_lets_them_go_with_it() -> None:
    handle, counts = _one_leaf_handle()
    gc.collect()
    assert counts() is not None  # its arrays are borrowed: the handle holds them
    cfg_i, cfg_f = np.zeros(CONFIG_INTS, dtype=np.int64), np.zeros(CONFIG_FLOATS)
    out = np.empty((1, 2))
    predict_rows(handle, cfg_i, cfg_f, np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64), out)
    assert out[0].tolist() == [0.25, 0.75]
    del handle
    gc.collect()
    assert counts() is None


def test_an_event_handle_keeps_the_handles_it_points_into_alive() -> None:
    handle, counts = _one_leaf_handle()
    cfg_i, cfg_f = np.zeros(CONFIG_INTS, dtype=np.int64), np.zeros(CONFIG_FLOATS)
    event = event_handle(handle, handle, drift_handle(new_drift(0.01)), cfg_i, cfg_f, np.zeros(0, dtype=np.int64))
    del handle
    gc.collect()
    assert counts() is not None  # the event holds the handle, which holds the arrays
    out = predict_event(event, np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64), 2)
    assert out == [0.25, 0.75]
    del event
    gc.collect()
    assert counts() is None
