"""The drift policy's bookkeeping (the policy: :mod:`streamtree.kernels.learn`): the log of
drift events, the background tree's adoption, and the 0/1 error ADWIN reads."""

from __future__ import annotations

from numba import njit

from streamtree.state import (
    A_CHANGE,
    A_DETECTED_AT,
    A_DETECTIONS,
    A_N_ROWS,
    A_TIME,
    A_TOTAL,
    A_VARIANCE,
    A_WIDTH,
    D_ACTIVE,
    D_N_EVENTS,
    D_SWAPS,
    D_TREE_SINCE,
    EVENTS_KEPT,
    M_EXAMPLES,
    SWAP,
)

__all__ = ["adopt", "argmax_error", "log_event"]


@njit(cache=True)
def log_event(d, kind, at) -> None:  # type: ignore[no-untyped-def]
    """Append a drift event, keeping the most recent ``EVENTS_KEPT``."""
    n = int(d.drift_s[D_N_EVENTS])
    if n == EVENTS_KEPT:
        for i in range(EVENTS_KEPT - 1):
            d.drift_ev[i, 0] = d.drift_ev[i + 1, 0]
            d.drift_ev[i, 1] = d.drift_ev[i + 1, 1]
        n -= 1
    d.drift_ev[n, 0] = kind
    d.drift_ev[n, 1] = at
    d.drift_s[D_N_EVENTS] = n + 1


@njit(cache=True)
def adopt(d, bg, at) -> None:  # type: ignore[no-untyped-def]
    """The background tree becomes the tree: a new error stream starts (ADWIN restarts)."""
    d.drift_s[D_TREE_SINCE] = at - bg.meta[M_EXAMPLES]
    # the adopted tree goes on with the model's schedule of refits and naive-Bayes samples
    # (keeping its own count cost log loss: docs/decisions/drift.md)
    bg.meta[M_EXAMPLES] = at
    d.drift_s[D_ACTIVE] = 0.0
    d.drift_s[D_SWAPS] += 1.0
    d.adwin_b[:] = 0.0
    d.adwin_n[:] = 0
    for i in (A_WIDTH, A_TOTAL, A_VARIANCE, A_TIME, A_DETECTIONS, A_CHANGE, A_DETECTED_AT):
        d.adwin_s[i] = 0.0
    d.adwin_s[A_N_ROWS] = 1.0
    log_event(d, SWAP, at)


@njit(cache=True)
def argmax_error(counts, leaf, n_classes, k) -> float:  # type: ignore[no-untyped-def]
    """1.0 when the leaf's most counted class (the first on ties) is not ``k``."""
    best = 0
    for c in range(1, n_classes):
        if counts[leaf, c] > counts[leaf, best]:
            best = c
    return 0.0 if best == k else 1.0
