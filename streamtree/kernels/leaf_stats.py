"""A leaf's split statistics: adding an example to them, and what they say can be split.

Pure functions of the slot arrays of :mod:`streamtree.state` (``num_stats``, ``num_range``,
``nom_stats``, ``slot_seen``, ``shift``). The statistics are added with the same arithmetic in
the same order as the reference ``LeafStats`` (``tests/reference/observers.py``), so they are
bit-identical to its.
"""

from __future__ import annotations

import math

from numba import njit

from streamtree.state import KIND, LEAF, MAX, MIN, N_, Q_, S_, SEEN, SLOT

__all__ = ["classes_seen", "splittable", "unsee", "update_stats", "value_seen"]


@njit(cache=True, inline="always")
def update_stats(num_stats, num_range, nom_stats, slot_seen, shift, slot, k, num_row, nom_row):  # type: ignore[no-untyped-def]
    """Add one example of class ``k`` to the statistics of ``slot``.

    Parameters
    ----------
    num_stats : float64[S, F, K, 3]
    num_range : float64[S, F, 2]
    nom_stats : float64[S, C, V, K]
    slot_seen : float64[S, 3]
    shift : float64[F]
    slot, k : int
        The slot and the example's class code.
    num_row : float64[:]
        Numeric values of columns ``0 .. len(num_row) - 1``; NaN is missing.
    nom_row : int64[:]
        Nominal value codes of columns ``0 .. len(nom_row) - 1``; negative is missing.

    Notes
    -----
    For every present numeric value ``x_f``, with ``v = x_f - shift[f]``::

        N[slot, f, k] += 1;  S[slot, f, k] += v;  Q[slot, f, k] += v * v
        MIN[slot, f] = min(MIN[slot, f], x_f);  MAX[slot, f] = max(MAX[slot, f], x_f)

    for every present nominal code ``v_c``: ``nom_stats[slot, c, v_c, k] += 1``; and
    ``slot_seen[slot, SEEN] += 1``. This is ``LeafStats._add`` for one row, so adding rows one by
    one in example order gives bit-identical sums (a tie in ``min``/``max`` takes the new value,
    as numpy's ``minimum.at`` does: it only shows in the sign of a zero). The arrays must already
    be large enough for ``slot``, ``k``, the columns and the codes (no bounds checks).
    """
    for f in range(num_row.shape[0]):
        raw = num_row[f]
        if math.isnan(raw):
            continue
        v = raw - shift[f]
        num_stats[slot, f, k, N_] += 1.0
        num_stats[slot, f, k, S_] += v
        num_stats[slot, f, k, Q_] += v * v
        if not num_range[slot, f, MIN] < raw:
            num_range[slot, f, MIN] = raw
        if not num_range[slot, f, MAX] > raw:
            num_range[slot, f, MAX] = raw
    for c in range(nom_row.shape[0]):
        code = nom_row[c]
        if code >= 0:
            nom_stats[slot, c, code, k] += 1.0
    slot_seen[slot, SEEN] += 1.0


@njit(cache=True)
def splittable(num_stats, num_range, nom_stats, slot, k, n_numeric, n_values, f) -> bool:  # type: ignore[no-untyped-def]
    """Whether feature ``f`` (numeric ``f < F``, else nominal ``f - F``) can separate the
    leaf's examples: a numeric one seen with two values, a nominal one with two values seen."""
    if f < n_numeric:
        if not num_range[slot, f, MAX] > num_range[slot, f, MIN]:
            return False
        for c in range(k):
            if num_stats[slot, f, c, N_] > 0.0:
                return True
        return False
    col = f - n_numeric
    n_seen = 0
    for v in range(n_values):
        n_seen += value_seen(nom_stats, slot, col, v, k)
    return n_seen >= 2


@njit(cache=True)
def classes_seen(num_stats, nom_stats, slot, k, n_numeric, n_nominal, n_values) -> int:  # type: ignore[no-untyped-def]
    """How many of the ``k`` classes the split statistics of ``slot`` hold examples of (with a
    value of some feature), counting no further than 2.

    Below 2 no candidate can separate classes: every merit :func:`~streamtree.kernels.split.best_split` would compute is
    0 up to rounding (information gain ``sum T log T``-terms that cancel, Gini ``G = 0``,
    Hellinger without a pair), which the learning loop already refuses (``MERIT_NOISE``).
    Checking first skips that search, which pure leaves (common) would otherwise pay."""
    n = 0
    for c in range(k):
        seen = False
        for f in range(n_numeric):
            if num_stats[slot, f, c, N_] > 0.0:
                seen = True
                break
        if not seen:
            for col in range(n_nominal):
                for v in range(n_values):
                    if nom_stats[slot, col, v, c] > 0.0:
                        seen = True
                        break
                if seen:
                    break
        if seen:
            n += 1
            if n == 2:
                return n
    return n


@njit(cache=True)
def value_seen(nom_stats, slot, col, v, k) -> bool:  # type: ignore[no-untyped-def]
    """Whether the leaf owning ``slot`` saw value ``v`` of nominal column ``col``."""
    for c in range(k):
        if nom_stats[slot, col, v, c] > 0.0:
            return True
    return False


@njit(cache=True, inline="always")
def unsee(t, path, length):  # type: ignore[no-untyped-def]
    """Before a repetition of an example is learned again in tree ``t`` (a handle), routed to
    ``path[:length]`` (``repeats_as_seen=False``): take back the example seen that
    :func:`update_stats` will add to its leaf's slot, so the leaf's examples seen (the
    Hoeffding bound's ``n``, the tie threshold's, the grace period's clock) count the example
    once while its counts and split statistics count every repetition."""
    leaf = path[length - 1]
    slot = t.node[leaf, SLOT]
    if t.node[leaf, KIND] == LEAF and slot >= 0:
        t.slot_seen[slot, SEEN] -= 1.0
