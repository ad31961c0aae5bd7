"""ADWIN change detection as a compiled kernel over the tree's ``adwin_*`` arrays.

ADWIN2 (Bifet and Gavaldà, 2007, "Learning from time-changing data with adaptive windowing";
MOA's, the detector in river's ``HoeffdingAdaptiveTreeClassifier``): a window ``W`` of the most
recent values is kept as an exponential histogram, and every ``clock`` values, while some split
of ``W`` into an older ``W0`` and a newer ``W1`` has means that differ by more than

.. math::

    \\varepsilon = \\sqrt{2 m \\sigma^2_W d} + \\tfrac{2}{3} d m, \\qquad
    m = \\frac{1}{n_0 - \\ell + 1} + \\frac{1}{n_1 - \\ell + 1}, \\qquad
    d = \\ln \\frac{2 \\ln |W|}{\\delta},

the older part of the most significant such split (the largest ``|mean0 - mean1| / eps``) is
dropped. A cut is reported as a change unless it only drops values that were already in the
window at the last reported change and moves the mean the same way. Both differ from MOA's
ADWIN2, which drops one oldest bucket at a time while some split is significant and reports
every cut: it stops with a tail of old values in the window that becomes significant again as
new values come, so one abrupt change was typically reported three or four times (by river's
ADWIN, which empties its window after a detection, once). The reference's module docstring
derives both; the test, and so the first alarm and the false-alarm bound, are unchanged.

The reference implementation is ``tests/reference/adwin.py``; the kernel runs it
with the same floating-point operations in the same order, so the kernel and the class agree
bit for bit (width, total, variance, change, and the examples at which they fire). The state
lives in three arrays (:mod:`streamtree.state`):

- ``adwin_b[row, j, TOTAL | VARIANCE]``: bucket ``j`` of row ``row`` (``2**row`` values each),
  oldest first; only ``j < adwin_n[row]`` is meaningful (vacated buckets are zeroed);
- ``adwin_n[row]``: buckets in the row (at most ``max_buckets`` between updates, one more
  while an update compresses, so ``adwin_b.shape[1]`` must be at least ``max_buckets + 1``);
- ``adwin_s``: ``A_DELTA``, ``A_CLOCK``, ``A_MAX_BUCKETS``, ``A_WIDTH``, ``A_TOTAL``,
  ``A_VARIANCE`` (sum of squared deviations from the window mean), ``A_TIME``,
  ``A_DETECTIONS``, ``A_CHANGE`` (newer part's mean minus older part's mean at the last
  detection), ``A_N_ROWS`` (rows in use, the newest non-empty one last; at least 1) and
  ``A_DETECTED_AT`` (``A_TIME`` at the last detection; 0: none).

Integer counters are stored as float64 (exact below ``2**53``).

:func:`adwin_from_state` and :func:`adwin_to_state` convert from and to the dictionary of
the reference ``Adwin.to_state()`` (the version-2 model format), so detectors of models saved before
the compiled core load unchanged; a state without ``detected_at`` (saved before it existed) has
no detection on record, so its next cut is reported.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from streamtree.state import (
    A_CHANGE,
    A_CLOCK,
    A_DELTA,
    A_DETECTED_AT,
    A_DETECTIONS,
    A_MAX_BUCKETS,
    A_N_ROWS,
    A_TIME,
    A_TOTAL,
    A_VARIANCE,
    A_WIDTH,
    ADWIN_ROWS,
    ADWIN_SCALARS,
    TOTAL,
    VARIANCE,
)

__all__ = ["MIN_PART", "adwin_from_state", "adwin_to_state", "adwin_update", "new_adwin"]

MIN_PART = 5  # the smallest W0 and W1 a cut may leave, as in MOA


@njit(cache=True)
def adwin_update(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray, value: float) -> bool:
    """Add ``value`` to the window; ``True`` when the window was cut (a detected change).

    The window ``W`` (``n = |W|`` values, total ``u``, squared deviations ``V``) takes the
    value ``x`` as

    .. math::

        V \\leftarrow V + \\frac{(n - 1)\\,(x - u / (n - 1))^2}{n}, \\qquad u \\leftarrow u + x

    (``n`` already counting ``x``) and a new bucket ``(x, 0)`` in row 0. A row holding more
    than ``max_buckets`` buckets merges its two oldest, ``(t_1, v_1)`` and ``(t_2, v_2)`` of
    ``s = 2^i`` values each, into one bucket of row ``i + 1``:

    .. math::

        \\left(t_1 + t_2,\\; v_1 + v_2 + \\frac{s^2\\,((t_1 - t_2)/s)^2}{2 s}\\right).

    Every ``clock`` values (when ``n > 5``) every split of ``W`` at a bucket boundary into an
    older part (``n_0`` values, total ``u_0``) and a newer part (``n_1``, ``u_1``), both
    larger than ``MIN_PART + 1``, is tested; while some are significant,

    .. math::

        g = \\left|\\frac{u_0}{n_0} - \\frac{u_1}{n_1}\\right| > \\varepsilon = \\sqrt{2 m \\frac{V}{n} d}
        + \\tfrac{2}{3} d m, \\qquad
        m = \\frac{1}{n_0 - 4} + \\frac{1}{n_1 - 4}, \\qquad
        d = \\ln \\frac{2 \\ln n}{\\delta},

    the buckets of the older part of the one with the largest ``g / eps`` (the oldest on ties)
    are dropped, oldest first; dropping a bucket ``(t, v)`` of ``s`` values is

    .. math::

        n \\leftarrow n - s, \\quad u \\leftarrow u - t, \\quad
        V \\leftarrow \\max\\left(0,\\; V - v - \\frac{s n\\,(t/s - u/n)^2}{s + n}\\right)

    (``V = 0`` when the window empties). With ``c = u_1/n_1 - u_0/n_0`` at the first cut of
    the update, ``t`` the values seen (``A_TIME``) and ``t_d`` those seen at the last
    detection (``A_DETECTED_AT``), the cut is a detection when

    .. math::

        t - n > t_d \\quad\\text{or}\\quad (c > 0) \\ne (c_d > 0)

    (``t - n``: the newest dropped value; ``c_d``: ``A_CHANGE``): it then sets ``A_CHANGE``
    to ``c`` and ``A_DETECTED_AT`` to ``t``, and adds one to ``A_DETECTIONS``. Otherwise it
    only re-placed the change last detected (it still shrank the window).

    Parameters
    ----------
    adwin_b, adwin_n, adwin_s
        The detector's buckets, bucket counts and scalars (mutated in place).
    value
        The new value (e.g. a 0/1 error).

    Returns
    -------
    bool
        Whether a change was detected.
    """
    max_buckets = int(adwin_s[A_MAX_BUCKETS])
    if max_buckets < 1 or max_buckets + 1 > adwin_b.shape[1]:
        raise ValueError("adwin_b has fewer than max_buckets + 1 buckets per row")
    width = int(adwin_s[A_WIDTH]) + 1
    total = adwin_s[A_TOTAL]
    if width > 1:
        diff = value - total / (width - 1)
        adwin_s[A_VARIANCE] += (width - 1) * diff * diff / width
    adwin_s[A_WIDTH] = width
    adwin_s[A_TOTAL] = total + value
    j = adwin_n[0]
    adwin_b[0, j, TOTAL] = value
    adwin_b[0, j, VARIANCE] = 0.0
    adwin_n[0] = j + 1
    if j + 1 > max_buckets:
        _compress(adwin_b, adwin_n, adwin_s, max_buckets)
    time = int(adwin_s[A_TIME]) + 1
    adwin_s[A_TIME] = time
    if time % int(adwin_s[A_CLOCK]) == 0 and width > MIN_PART:
        cut, change = _cut(adwin_b, adwin_n, adwin_s)
        # a cut of values all seen at the last detection, the same way, re-places that change
        new = time - int(adwin_s[A_WIDTH]) > int(adwin_s[A_DETECTED_AT]) or (change > 0.0) != (adwin_s[A_CHANGE] > 0.0)
        if cut and new:
            adwin_s[A_CHANGE] = change
            adwin_s[A_DETECTED_AT] = time
            adwin_s[A_DETECTIONS] += 1.0
            return True
    return False


@njit(cache=True)
def _pop_front(adwin_b: np.ndarray, adwin_n: np.ndarray, row: int, count: int) -> None:
    """Remove the ``count`` oldest buckets of ``row`` (the rest move forward; vacated: 0)."""
    n = adwin_n[row]
    for j in range(count, n):
        adwin_b[row, j - count, TOTAL] = adwin_b[row, j, TOTAL]
        adwin_b[row, j - count, VARIANCE] = adwin_b[row, j, VARIANCE]
    for j in range(n - count, n):
        adwin_b[row, j, TOTAL] = 0.0
        adwin_b[row, j, VARIANCE] = 0.0
    adwin_n[row] = n - count


@njit(cache=True)
def _compress(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray, max_buckets: int) -> None:
    """Merge the two oldest buckets of every row that has one bucket too many (Adwin._compress)."""
    n_rows = int(adwin_s[A_N_ROWS])
    i = 0
    while adwin_n[i] > max_buckets:
        if i + 1 == n_rows:
            if n_rows == adwin_b.shape[0]:
                raise ValueError("ADWIN needs more bucket rows than adwin_b has")
            n_rows += 1
            adwin_s[A_N_ROWS] = n_rows
        size = float(1 << i)
        t1 = adwin_b[i, 0, TOTAL]
        t2 = adwin_b[i, 1, TOTAL]
        diff = (t1 - t2) / size
        j = adwin_n[i + 1]
        adwin_b[i + 1, j, TOTAL] = t1 + t2
        adwin_b[i + 1, j, VARIANCE] = (
            adwin_b[i, 0, VARIANCE] + adwin_b[i, 1, VARIANCE] + size * size * diff * diff / (2 * size)
        )
        adwin_n[i + 1] = j + 1
        _pop_front(adwin_b, adwin_n, i, 2)
        i += 1


@njit(cache=True)
def _drop_oldest(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray) -> None:
    """Forget the oldest bucket (Adwin._drop_oldest)."""
    n_rows = int(adwin_s[A_N_ROWS])
    row = n_rows - 1
    while adwin_n[row] == 0:
        row -= 1
    size = 1 << row
    total = adwin_b[row, 0, TOTAL]
    variance = adwin_b[row, 0, VARIANCE]
    _pop_front(adwin_b, adwin_n, row, 1)
    width = int(adwin_s[A_WIDTH]) - size
    rest = adwin_s[A_TOTAL] - total
    var = adwin_s[A_VARIANCE]
    if width != 0:
        diff = total / size - rest / width
        var -= variance + size * width * diff * diff / (size + width)
    else:
        var = 0.0
    if 0.0 > var:  # Python's max(var, 0.0), NaN included
        var = 0.0
    adwin_s[A_WIDTH] = width
    adwin_s[A_TOTAL] = rest
    adwin_s[A_VARIANCE] = var
    while n_rows > 1 and adwin_n[n_rows - 1] == 0:
        n_rows -= 1
    adwin_s[A_N_ROWS] = n_rows


@njit(cache=True)
def _split(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray) -> tuple[int, float]:
    """The most significant split: (buckets in W0, newer mean - older mean); (0, 0.0): none (Adwin._split)."""
    width = int(adwin_s[A_WIDTH])
    dd = math.log(2.0 * math.log(width) / adwin_s[A_DELTA])
    v = adwin_s[A_VARIANCE] / width
    n0 = 0
    u0 = 0.0
    n1 = width
    u1 = adwin_s[A_TOTAL]
    buckets = 0
    best = 0
    best_score = 0.0
    change = 0.0
    for row in range(int(adwin_s[A_N_ROWS]) - 1, -1, -1):
        size = 1 << row
        count = adwin_n[row]
        for j in range(count):
            total = adwin_b[row, j, TOTAL]
            n0 += size
            n1 -= size
            u0 += total
            u1 -= total
            buckets += 1
            if row == 0 and j == count - 1:
                break  # W1 would be empty
            if n0 > MIN_PART + 1 and n1 > MIN_PART + 1:
                m = 1.0 / (n0 - MIN_PART + 1) + 1.0 / (n1 - MIN_PART + 1)
                eps = math.sqrt(2.0 * m * v * dd) + 2.0 / 3.0 * dd * m
                gap = abs(u0 / n0 - u1 / n1)
                if gap > eps and gap / eps > best_score:
                    best = buckets
                    best_score = gap / eps
                    change = u1 / n1 - u0 / n0
    return best, change


@njit(cache=True)
def _cut(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray) -> tuple[bool, float]:
    """Drop the older part of the most significant split while there is one; whether the window
    was cut, and the change at the first cut (Adwin._cut)."""
    cut = False
    change = 0.0
    while int(adwin_s[A_WIDTH]) > MIN_PART:
        buckets, split_change = _split(adwin_b, adwin_n, adwin_s)
        if buckets == 0:
            break
        if not cut:
            cut = True
            change = split_change
        for _ in range(buckets):
            _drop_oldest(adwin_b, adwin_n, adwin_s)
    return cut, change


# -- Python helpers (not compiled) ---------------------------------------------------------
def new_adwin(delta: float = 0.002, clock: int = 32, max_buckets: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty detector's ``(adwin_b, adwin_n, adwin_s)``, as the reference ``Adwin`` (``tests/reference/adwin.py``)
    ``(delta, clock, max_buckets)`` starts.

    ``adwin_b`` has ``max(6, max_buckets + 1)`` buckets per row: the tree's layout
    (:func:`streamtree.state.new_arrays`) for the default ``max_buckets = 5``."""
    if int(max_buckets) < 1 or int(clock) < 1:
        raise ValueError("clock and max_buckets must be at least 1")
    adwin_b = np.zeros((ADWIN_ROWS, max(6, int(max_buckets) + 1), 2))
    adwin_n = np.zeros(ADWIN_ROWS, dtype=np.int64)
    adwin_s = np.zeros(ADWIN_SCALARS)
    adwin_s[A_DELTA] = float(delta)
    adwin_s[A_CLOCK] = int(clock)
    adwin_s[A_MAX_BUCKETS] = int(max_buckets)
    adwin_s[A_N_ROWS] = 1
    return adwin_b, adwin_n, adwin_s


def adwin_from_state(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(adwin_b, adwin_n, adwin_s)`` from the dictionary :meth:`Adwin.to_state
    <the reference ``tests/reference/adwin.py``.to_state>` produces (and :func:`adwin_to_state`)."""
    adwin_b, adwin_n, adwin_s = new_adwin(float(state["delta"]), int(state["clock"]), int(state["max_buckets"]))
    row_sizes = np.asarray(state["row_sizes"], dtype=np.int64).reshape(-1)
    totals = np.asarray(state["totals"], dtype=np.float64).reshape(-1)
    variances = np.asarray(state["variances"], dtype=np.float64).reshape(-1)
    if not 1 <= row_sizes.size <= ADWIN_ROWS:
        raise ValueError(f"an ADWIN state needs 1 to {ADWIN_ROWS} bucket rows, not {row_sizes.size}")
    if (row_sizes < 0).any() or (row_sizes > adwin_b.shape[1] - 1).any():
        raise ValueError("an ADWIN state's row holds more than max_buckets buckets")
    if not int(row_sizes.sum()) == totals.size == variances.size:
        raise ValueError("an ADWIN state's row sizes do not match its totals and variances")
    start = 0
    for row, size in enumerate(row_sizes.tolist()):
        adwin_b[row, :size, TOTAL] = totals[start : start + size]
        adwin_b[row, :size, VARIANCE] = variances[start : start + size]
        adwin_n[row] = size
        start += size
    adwin_s[A_WIDTH] = int(state["width"])
    adwin_s[A_TOTAL] = float(state["total"])
    adwin_s[A_VARIANCE] = float(state["variance"])
    adwin_s[A_TIME] = int(state["time"])
    adwin_s[A_DETECTIONS] = int(state["n_detections"])
    adwin_s[A_CHANGE] = float(state["change"])
    adwin_s[A_N_ROWS] = row_sizes.size
    adwin_s[A_DETECTED_AT] = int(state.get("detected_at", 0))  # absent before it existed: none on record
    return adwin_b, adwin_n, adwin_s


def adwin_to_state(adwin_b: np.ndarray, adwin_n: np.ndarray, adwin_s: np.ndarray) -> dict[str, Any]:
    """The dictionary the reference ``Adwin.to_state()`` (the version-2 model format) would give for
    this detector (same keys, value types and bucket order)."""
    n_rows = int(adwin_s[A_N_ROWS])
    sizes = [int(n) for n in adwin_n[:n_rows]]
    return {
        "delta": float(adwin_s[A_DELTA]),
        "clock": int(adwin_s[A_CLOCK]),
        "max_buckets": int(adwin_s[A_MAX_BUCKETS]),
        "width": int(adwin_s[A_WIDTH]),
        "total": float(adwin_s[A_TOTAL]),
        "variance": float(adwin_s[A_VARIANCE]),
        "time": int(adwin_s[A_TIME]),
        "n_detections": int(adwin_s[A_DETECTIONS]),
        "change": float(adwin_s[A_CHANGE]),
        "detected_at": int(adwin_s[A_DETECTED_AT]),
        "row_sizes": np.array(sizes, dtype=np.int64),
        "totals": np.array(
            [adwin_b[row, j, TOTAL] for row in range(n_rows) for j in range(sizes[row])], dtype=np.float64
        ),
        "variances": np.array(
            [adwin_b[row, j, VARIANCE] for row in range(n_rows) for j in range(sizes[row])], dtype=np.float64
        ),
    }
