"""The window of score rows and the tables that tally runs of them, added one row at a time in order.

:class:`Ring` keeps the last rows of a stream (the recent window); a table puts the window's
rows and a batch's new ones end to end (:class:`ScoreTable` for score rows,
:class:`CostTable` for cost score rows) so that the sums over any run of them, the whole
batch or the window as it stands after any row, come from one pass of
:func:`running_sums`: each sum adds its values left to right, so it does not depend on how
the stream was batched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from streamtree.typing import FloatArray, IntArray

from .scoring import BRIER, CONFIDENCE, CORRECT, LOG_LOSS

__all__ = ["CostTable", "Pending", "Ring", "ScoreTable", "Tables", "running_sums"]


def running_sums(start: Sequence[float], target: IntArray, values: FloatArray) -> list[float]:
    """Running sums: ``start``, then each of ``values`` added to the sum ``target`` names.

    Parameters
    ----------
    start
        ``(m,)`` the sums so far.
    target
        ``(n,)`` which sum each value goes to (``0 .. m - 1``).
    values
        ``(n,)`` the values, in order.

    Returns
    -------
    list of float
        ``(m,)`` the new sums.

    Notes
    -----
    Each sum is ``start[j] + v_1 + v_2 + ...`` over its values, added one at a time, left to
    right, not pairwise: so a sum does not depend on how a stream was cut into batches.
    ``np.add.at`` adds unbuffered, element by element in index order.
    """
    sums = np.array(start, dtype=np.float64)
    np.add.at(sums, target, values)
    return sums.tolist()  # type: ignore[no-any-return]


class Ring:
    """The last ``size`` rows (``width`` floats each) of a stream of rows: a ring buffer.

    Parameters
    ----------
    size
        Most rows kept; the oldest go first.
    width
        Floats per row.
    """

    def __init__(self, size: int, width: int) -> None:
        self.data = np.zeros((size, width), dtype=np.float64)
        self.end = 0  # the slot of the next row
        self.count = 0

    def __len__(self) -> int:
        return self.count

    @property
    def size(self) -> int:
        """Most rows kept."""
        return len(self.data)

    def extend(self, rows: FloatArray) -> None:
        """Append ``(n, width)`` rows, in order."""
        rows = rows[max(len(rows) - self.size, 0) :]
        if not len(rows):
            return
        before_wrap = min(len(rows), self.size - self.end)
        self.data[self.end : self.end + before_wrap] = rows[:before_wrap]
        self.data[: len(rows) - before_wrap] = rows[before_wrap:]
        self.end = (self.end + len(rows)) % self.size
        self.count = min(self.count + len(rows), self.size)

    def rows(self) -> FloatArray:
        """The rows, oldest first (a new array)."""
        return self.data.take(np.arange(self.end - self.count, self.end), axis=0, mode="wrap")


class Pending:
    """A window's rows (a :class:`Ring`'s, oldest first), then rows not yet added to it.

    Parameters
    ----------
    ring
        The window.
    pending
        The rows to be added, in order.
    window
        Whether to hold the window's rows (needed for its summaries, not to add the rows).
    """

    def __init__(self, ring: Ring, pending: FloatArray, window: bool) -> None:
        self.rows = np.concatenate((ring.rows(), pending)) if window and len(ring) else pending
        self.first = len(self.rows) - len(pending)  # the first pending row
        self.size = ring.size

    @property
    def pending(self) -> FloatArray:
        """The rows not yet added."""
        return self.rows[self.first :]

    def window(self, added: int) -> tuple[int, int]:
        """``(lo, hi)``: the window is ``rows[lo:hi]`` once the first ``added`` pending rows are added."""
        hi = self.first + added
        return max(hi - self.size, 0), hi


class ScoreTable(Pending):
    """Score rows (columns :data:`LOG_LOSS` .. :data:`CORRECT`), prepared to tally runs of them.

    Parameters
    ----------
    ring, pending, window
        As :class:`Pending` takes them.
    bins
        Equal-width confidence bins.
    """

    def __init__(self, ring: Ring, pending: FloatArray, window: bool, bins: int) -> None:
        super().__init__(ring, pending, window)
        rows = self.rows
        b = np.minimum((rows[:, CONFIDENCE] * bins).astype(np.int64), bins - 1)
        self.bins = bins
        self.target = np.empty((len(rows), 3), dtype=np.intp)  # the sum each summed column goes to
        self.target[:, LOG_LOSS], self.target[:, BRIER], self.target[:, CONFIDENCE] = 0, 1, b + 2
        self.values = np.ascontiguousarray(rows[:, :CORRECT])
        self.cell = b + bins * (rows[:, CORRECT] > 0)  # the bins of the wrong predictions, then the right ones

    def tally(self, lo: int, hi: int, start: Sequence[float]) -> tuple[list[float], list[int], list[int]]:
        """The sums, bin counts and correct counts of rows ``lo .. hi - 1``.

        Parameters
        ----------
        lo, hi
            The run of rows.
        start
            The sums so far: log loss, Brier score, then the confidence of each bin.

        Returns
        -------
        tuple of lists
            The sums after the rows, added one row at a time in order (:func:`running_sums`);
            the rows in each bin; the correct ones in each bin.
        """
        sums = running_sums(start, self.target[lo:hi].ravel(), self.values[lo:hi].ravel())
        cells = np.bincount(self.cell[lo:hi], minlength=2 * self.bins).tolist()
        corrects = cells[self.bins :]
        return sums, [a + b for a, b in zip(cells[: self.bins], corrects, strict=True)], corrects


class CostTable(Pending):
    """Cost score rows (improved squared error, decision cost; NaN: not costed), prepared to
    tally runs of them; as :class:`Pending` takes them."""

    def __init__(self, ring: Ring, pending: FloatArray, window: bool) -> None:
        super().__init__(ring, pending, window)
        costed = ~np.isnan(self.rows[:, 0])
        self.values = self.rows[costed]
        self.before = np.concatenate(([0], np.cumsum(costed)))  # costed rows before each row
        self.target = np.tile(np.arange(2), len(self.values))

    def tally(self, lo: int, hi: int, start: Sequence[float]) -> tuple[int, float, float]:
        """``(costed, sum of improved squared errors, sum of costs)`` of the costed rows among
        rows ``lo .. hi - 1``, the sums from ``start`` (:func:`running_sums`)."""
        a, b = int(self.before[lo]), int(self.before[hi])
        ise, cost = running_sums(start, self.target[2 * a : 2 * b], self.values[a:b].ravel())
        return b - a, ise, cost


class Tables(NamedTuple):
    """The window's score rows, then a batch's, of :class:`~app.prequential.Prequential` and its
    :class:`~app.prequential.CostScores`."""

    scores: ScoreTable
    costs: CostTable | None
