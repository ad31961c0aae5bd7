"""A borrowed array is the same memory as what it was borrowed from: kernels read and write the
model's arrays through it (handles, whose arrays are borrowed: tests/kernels/test_handle.py)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from streamtree.kernels.borrow import borrow, hold


@njit
def _write_through(a, row, value):  # type: ignore[no-untyped-def]
    b = borrow(a)
    b[row] = value  # a view of a borrowed array, written
    return b.shape, b.strides, b.ctypes.data


def test_a_borrowed_array_is_the_same_memory() -> None:
    a = np.zeros((4, 3))
    shape, strides, data = _write_through(a, 2, 7.0)
    assert (shape, strides, data) == (a.shape, a.strides, a.ctypes.data)
    assert a[2].tolist() == [7.0, 7.0, 7.0] and a.sum() == 21.0


def test_a_non_contiguous_array_keeps_its_strides() -> None:
    # the kernels' arrays are contiguous; borrow does not assume it
    a = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    shape, strides, data = _write_through(a, 0, -1)
    assert (shape, strides, data) == (a.shape, a.strides, a.ctypes.data)
    assert a[0].tolist() == [-1, -1]


@njit
def _sum_held() -> float:  # type: ignore[no-untyped-def]
    held = np.arange(5.0)
    view = borrow(held)
    total = 0.0
    for i in range(view.shape[0]):
        total += view[i]
    hold(held)
    return total


def test_an_array_made_in_a_kernel_is_read_while_held() -> None:
    assert _sum_held() == 10.0


def test_borrow_takes_arrays_only() -> None:
    @njit
    def borrow_a_number(x):  # type: ignore[no-untyped-def]
        return borrow(x)

    with pytest.raises(TypingError):
        borrow_a_number(1.0)
