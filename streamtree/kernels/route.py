"""Routing: the root-to-node path of an encoded example.

An example is a numeric row (NaN: missing) and a nominal row of value codes (-1: missing, or
at prediction a value the model has never seen). At node ``i`` with ``kind[i] == NUMERIC`` it
goes left when ``num[col[i]] <= thr[i]``; with ``kind[i] == NOMINAL`` when
``nom[col[i]] == thr[i]``, right for any other code. A split feature that is missing (or
unseen) stops it at ``i``, which then predicts from its own counts backed off to its ancestors.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamtree.state import COL, KIND, LEAF, LEFT, NUMERIC, RIGHT

__all__ = ["route"]


@njit(cache=True)
def route(node: np.ndarray, thr: np.ndarray, num_row: np.ndarray, nom_row: np.ndarray, path: np.ndarray) -> int:
    """Write the root-to-node path of one example into ``path``; return its length.

    ``path`` must hold at least ``depth + 1`` entries (a tree's node count is always enough).
    """
    i = 0
    length = 0
    while True:
        path[length] = i
        length += 1
        kind = node[i, KIND]
        if kind == LEAF:
            return length
        col = node[i, COL]
        if kind == NUMERIC:
            if col >= num_row.shape[0]:
                return length
            v = num_row[col]
            if v != v:  # NaN: missing
                return length
            i = node[i, LEFT] if v <= thr[i] else node[i, RIGHT]
        else:
            if col >= nom_row.shape[0]:
                return length
            code = nom_row[col]
            if code < 0:
                return length
            i = node[i, LEFT] if code == thr[i] else node[i, RIGHT]
