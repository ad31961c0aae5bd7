"""numpy's (and Python's) reductions, operation for operation, inside compiled kernels.

A sum of floats depends on its order. The kernels reproduce what the slow references compute
with numpy (``a.sum()``), so that a kernel and its oracle agree bit for bit: numpy sums a
contiguous run pairwise (``pairwise_sum`` in its ``loops_utils``), in blocks of at most 128
terms, each block with eight interleaved partial sums.
"""

from __future__ import annotations

import numpy as np
from numba import njit

BLOCK = 128  # numpy's PW_BLOCKSIZE


@njit(cache=True)
def _block(a, start, n):  # type: ignore[no-untyped-def]
    """numpy's pairwise sum of ``a[start:start + n]`` for ``n <= BLOCK`` (one block).

    Below 8 terms a plain left-to-right sum; else eight interleaved partial sums combined as
    ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the remaining terms.
    """
    if n < 8:
        res = -0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[start], a[start + 1], a[start + 2], a[start + 3]
    r4, r5, r6, r7 = a[start + 4], a[start + 5], a[start + 6], a[start + 7]
    i = 8
    stop = n - n % 8
    while i < stop:
        j = start + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[start + i]
        i += 1
    return res


@njit(cache=True)
def _half(n):  # type: ignore[no-untyped-def]
    h = n // 2
    return h - h % 8


@njit(cache=True)
def pairwise(a, start, n):  # type: ignore[no-untyped-def]
    """numpy's pairwise sum of ``a[start:start + n]`` (``pairwise_sum`` in its ``loops_utils``).

    Blocks of at most 128 terms are summed by :func:`_block`; a longer run is the sum of its two
    halves (the first a multiple of 8 terms long), each summed the same way. numpy recurses; this
    walks the same tree with an explicit stack, because numba segfaults when it loads a cached
    recursive function (numba issue #6061).
    """
    if n <= BLOCK:
        return _block(a, start, n)
    f_start = np.empty(64, dtype=np.int64)  # frames: the run, and the stage of its sum
    f_n = np.empty(64, dtype=np.int64)
    f_stage = np.empty(64, dtype=np.int64)  # 0 new, 1 summing the first half, 2 the second
    f_first = np.empty(64)  # the first half's sum
    d = 0
    f_start[0] = start
    f_n[0] = n
    f_stage[0] = 0
    while True:
        m = f_n[d]
        if m > BLOCK:  # descend into the first half
            f_stage[d] = 1
            f_start[d + 1] = f_start[d]
            f_n[d + 1] = _half(m)
            f_stage[d + 1] = 0
            d += 1
            continue
        value = _block(a, f_start[d], m)
        while True:  # hand the value up until a frame still has its second half to sum
            d -= 1
            if d < 0:
                return value
            if f_stage[d] == 1:
                f_first[d] = value
                f_stage[d] = 2
                h = _half(f_n[d])
                f_start[d + 1] = f_start[d] + h
                f_n[d + 1] = f_n[d] - h
                f_stage[d + 1] = 0
                d += 1
                break
            value = f_first[d] + value


@njit(cache=True)
def np_sum(a, start, n):  # type: ignore[no-untyped-def]
    """``a[start:start + n].sum()`` exactly as numpy reduces a contiguous axis: ``0 + pairwise``.

    Below 8 terms that is a left-to-right sum (written out here so that it stays a tight loop).
    """
    if n < 8:
        res = 0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    return 0.0 + pairwise(a, start, n)


@njit(cache=True)
def np_maximum(x: float, y: float) -> float:
    """``np.maximum``: NaN wins."""
    if x != x or x >= y:
        return x
    return y


@njit(cache=True)
def np_max(a: np.ndarray, n: int) -> float:
    """``a[:n].max()`` (``n >= 1``): NaN wins."""
    top = a[0]
    for i in range(1, n):
        top = np_maximum(top, a[i])
    return top


@njit(cache=True)
def py_max(a: np.ndarray, n: int, default: float) -> float:
    """Python's ``max(a[:n], default=default)``: the first item no later item exceeds."""
    if n == 0:
        return default
    top = a[0]
    for i in range(1, n):
        if a[i] > top:
            top = a[i]
    return top
