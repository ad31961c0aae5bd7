"""Prequential (test-then-train) evaluation of a stream of probabilistic predictions.

Before each labelled event is learned, the model's prediction for it is scored here. The
state is plain numbers so it is stored with each snapshot. Scores are computed a batch at a
time, yet every number depends only on the events and their order, never on how they were
batched: each row is scored on its own and the running sums are added row by row, in order.
So replaying a log in pages gives the same numbers, bit for bit, as the live requests did.

A batch is scored once, whatever points of the history fall due inside it: a point taken at
row ``i`` summarises the recent window as it stands after row ``i`` (the window's rows, then
the batch's scored rows up to ``i``), so no Python runs per event. The recent window is a ring
buffer of score rows; its sums are recomputed from its rows, oldest first, at each point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from app.history import History
from app.schemas import label_key
from streamtree.decision import CostMatrix, Costs, decide_many
from streamtree.metrics import improved_squared_errors
from streamtree.typing import ClassLabel, FloatArray, IntArray

__all__ = ["CostScores", "Prequential", "score", "scores"]

#: Probability floor for the log loss: an unseen true class would otherwise cost infinity.
EPS = 1e-15

BoolArray = npt.NDArray[np.bool_]

#: The columns of a score row in :class:`Prequential`'s window: the three summed, then whether
#: the prediction was right (1.0 or 0.0).
LOG_LOSS, BRIER, CONFIDENCE, CORRECT = range(4)

#: Batches of at most this many rows (and no cost metrics) are scored and added with Python
#: floats (:meth:`Prequential._update_few`): below it, numpy's fixed cost per call dominates
#: (a single row cost about 85 us the batch way, 10 us this way; measured).
FEW = 16


def scores(proba: FloatArray, known: IntArray, label: IntArray) -> tuple[FloatArray, FloatArray, BoolArray,
                                                                          FloatArray]:
    """Score ``n`` predictions against their true labels, each row on its own.

    Parameters
    ----------
    proba
        ``(n, k)`` predicted probabilities, columns in the model's class order.
    known
        ``(n,)`` number of classes the model had seen at each row (at least 1): row ``i``
        predicts over columns ``0 .. known[i] - 1``; later columns are ignored.
    label
        ``(n,)`` column of each row's true label; it may be a class the model had not seen
        yet (``label[i] >= known[i]``: probability 0).

    Returns
    -------
    tuple of arrays
        ``(log_loss, brier, correct, confidence)`` per row.

    Notes
    -----
    With :math:`p_c` the predicted probability of class :math:`c` and :math:`y` the label:
    log loss :math:`-\\ln \\max(p_y, \\epsilon)` with :math:`\\epsilon = 10^{-15}`; Brier score
    :math:`\\sum_c (p_c - [c = y])^2` (multi-class form, in [0, 2]), summed in class order,
    plus 1 when :math:`y` was unseen; ``correct`` is whether the most probable class (first in
    the model's class order on ties) is :math:`y`; ``confidence`` is that class's
    probability, used by the reliability diagram.
    """
    n, k = proba.shape
    rows = np.arange(n)
    columns = np.arange(k)
    seen = columns < known[:, None]
    every_seen = bool(seen.all())
    # the usual case, every column seen and float64: nothing to blank out (nor np.where's dtype to take)
    p = proba if every_seen and proba.dtype == np.float64 else np.where(seen, proba, 0.0)
    # math.log, not np.log: numpy's vectorised log may round a value differently by its
    # position in the array, and a row's score must not depend on its batch.
    log_loss = -np.fromiter(map(math.log, np.maximum(p[rows, label], EPS).tolist()), dtype=np.float64, count=n)
    squares = (p - (columns == label[:, None])) ** 2
    if not every_seen:
        squares = np.where(seen, squares, 0.0)
    # class by class, left to right: a sum over the prediction in class order
    brier = squares[:, 0].copy()
    for c in range(1, k):
        brier += squares[:, c]
    brier += label >= known  # +1: the unseen true class had 0
    top = p.argmax(axis=1)
    return log_loss, brier, top == label, p[rows, top]


def _score_row(p: list[float], known: int, label: int) -> tuple[float, float, float, float]:
    """One row of :func:`scores` as a score row ``(log_loss, brier, confidence, correct)``
    (columns :data:`LOG_LOSS` .. :data:`CORRECT`), with Python floats: for a few rows, numpy's
    fixed cost per call is most of the time. The same operations in the same order, so the
    same bits: a square is a product, the Brier sum runs over the classes left to right, and
    the top class is the first of the largest probabilities."""
    seen = [v if c < known else 0.0 for c, v in enumerate(p)]
    log_loss = -math.log(max(seen[label], EPS))
    brier = 0.0
    for c in range(known):
        d = seen[c] - (1.0 if c == label else 0.0)
        brier += d * d
    if label >= known:
        brier += 1.0  # the unseen true class had 0
    top = 0
    for c in range(1, len(seen)):
        if seen[c] > seen[top]:
            top = c
    return log_loss, brier, seen[top], 1.0 if top == label else 0.0


def _one_row(proba: Mapping[ClassLabel, float],
             label: ClassLabel) -> tuple[FloatArray, IntArray, IntArray, list[ClassLabel]]:
    """One prediction as :func:`scores` takes it, and its classes."""
    classes = list(proba) + ([] if label in proba else [label])
    row = np.array([[proba.get(c, 0.0) for c in classes]], dtype=np.float64)
    return row, np.array([len(proba)]), np.array([classes.index(label)]), classes


def score(proba: Mapping[ClassLabel, float], label: ClassLabel) -> tuple[float, float, bool, float]:
    """Score one prediction (a non-empty mapping of class to probability) against its label.

    Returns ``(log_loss, brier, correct, confidence)``; see :func:`scores`.
    """
    log_loss, brier, correct, conf = scores(*_one_row(proba, label)[:3])
    return float(log_loss[0]), float(brier[0]), bool(correct[0]), float(conf[0])


def _running_sums(start: Sequence[float], target: IntArray, values: FloatArray) -> list[float]:
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


class _Ring:
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
        rows = rows[max(len(rows) - self.size, 0):]
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


class _Pending:
    """A window's rows (a :class:`_Ring`'s, oldest first), then rows not yet added to it.

    Parameters
    ----------
    ring
        The window.
    pending
        The rows to be added, in order.
    window
        Whether to hold the window's rows (needed for its summaries, not to add the rows).
    """

    def __init__(self, ring: _Ring, pending: FloatArray, window: bool) -> None:
        self.rows = np.concatenate((ring.rows(), pending)) if window and len(ring) else pending
        self.first = len(self.rows) - len(pending)  # the first pending row
        self.size = ring.size

    @property
    def pending(self) -> FloatArray:
        """The rows not yet added."""
        return self.rows[self.first:]

    def window(self, added: int) -> tuple[int, int]:
        """``(lo, hi)``: the window is ``rows[lo:hi]`` once the first ``added`` pending rows are added."""
        hi = self.first + added
        return max(hi - self.size, 0), hi


class _ScoreTable(_Pending):
    """Score rows (columns :data:`LOG_LOSS` .. :data:`CORRECT`), prepared to tally runs of them.

    Parameters
    ----------
    ring, pending, window
        As :class:`_Pending` takes them.
    bins
        Equal-width confidence bins.
    """

    def __init__(self, ring: _Ring, pending: FloatArray, window: bool, bins: int) -> None:
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
            The sums after the rows, added one row at a time in order (:func:`_running_sums`);
            the rows in each bin; the correct ones in each bin.
        """
        sums = _running_sums(start, self.target[lo:hi].ravel(), self.values[lo:hi].ravel())
        cells = np.bincount(self.cell[lo:hi], minlength=2 * self.bins).tolist()
        corrects = cells[self.bins:]
        return sums, [a + b for a, b in zip(cells[: self.bins], corrects, strict=True)], corrects


class _CostTable(_Pending):
    """Cost score rows (improved squared error, decision cost; NaN: not costed), prepared to
    tally runs of them; as :class:`_Pending` takes them."""

    def __init__(self, ring: _Ring, pending: FloatArray, window: bool) -> None:
        super().__init__(ring, pending, window)
        costed = ~np.isnan(self.rows[:, 0])
        self.values = self.rows[costed]
        self.before = np.concatenate(([0], np.cumsum(costed)))  # costed rows before each row
        self.target = np.tile(np.arange(2), len(self.values))

    def tally(self, lo: int, hi: int, start: Sequence[float]) -> tuple[int, float, float]:
        """``(costed, sum of improved squared errors, sum of costs)`` of the costed rows among
        rows ``lo .. hi - 1``, the sums from ``start`` (:func:`_running_sums`)."""
        a, b = int(self.before[lo]), int(self.before[hi])
        ise, cost = _running_sums(start, self.target[2 * a : 2 * b], self.values[a:b].ravel())
        return b - a, ise, cost


class _Tables(NamedTuple):
    """The window's score rows, then a batch's, of :class:`Prequential` and its :class:`CostScores`."""

    scores: _ScoreTable
    costs: _CostTable | None


def _nan_to_none(v: float) -> float | None:
    return None if math.isnan(v) else v


class CostScores:
    """The scores of a model's predictions under a cost matrix, over all events and a window.

    Each scored event gets the improved squared error of its prediction (Fan et al. 2005,
    Eq. 3; :func:`streamtree.metrics.improved_squared_errors`) and the cost, under its true
    label, of the decision of least expected cost (:func:`streamtree.decision.decide_many`).
    An event is *costed* only if the costs cover its label and every label it was predicted
    over (a label the cost matrix lacks may arrive in the stream); the others get NaN and are
    left out of the means.

    Parameters
    ----------
    costs
        Decision to ``{label: cost}``, labels as JSON keys (:func:`app.schemas.label_key`).
    window
        The window of :class:`Prequential` (the same events).
    """

    def __init__(self, costs: Costs | CostMatrix, window: int) -> None:
        self.costs = CostMatrix.of(costs)
        self.window = window
        self.n = 0
        self.sum_ise = 0.0
        self.sum_cost = 0.0
        self.recent = _Ring(window, 2)  # (improved squared error, decision cost), NaN: not costed

    def scores(self, proba: FloatArray, known: IntArray, label: IntArray,
               classes: Sequence[ClassLabel]) -> tuple[FloatArray, FloatArray]:
        """``(improved squared error, decision cost)`` of each row (``known >= 1``; NaN where
        the costs do not cover the row's labels), each row on its own."""
        costs = self.costs
        keys = [label_key(c) for c in classes]
        covered = np.zeros(proba.shape[1] + 1, dtype=bool)  # a column without a class: not covered
        covered[: len(keys)] = [costs.covers(k) for k in keys[: proba.shape[1]]]
        first_gap = int(np.argmin(covered))  # rows predicted over more classes than this are not costed
        ok = (known <= first_gap) & covered[label]
        ise = np.full(len(label), np.nan)
        cost = np.full(len(label), np.nan)
        for k in np.unique(known[ok]).tolist():  # classes only grow: a few groups per batch
            rows = np.flatnonzero(ok & (known == k))
            p = proba[rows, :k]
            ys = [keys[j] for j in label[rows].tolist()]
            ise[rows] = improved_squared_errors(p, ys, costs, classes=keys[:k], check_input=False)
            chosen = decide_many(p, costs, classes=keys[:k], check_input=False).index
            cost[rows] = costs.table[chosen, [costs.column[y] for y in ys]]
        return ise, cost

    def table(self, pending: FloatArray, window: bool) -> _CostTable:
        """The window's rows (if ``window``), then ``pending`` ``(n, 2)`` rows as :meth:`scores`
        gives them."""
        return _CostTable(self.recent, pending, window)

    def add(self, table: _CostTable) -> None:
        """Add the table's pending rows, in order."""
        n, self.sum_ise, self.sum_cost = table.tally(table.first, len(table.rows), [self.sum_ise, self.sum_cost])
        self.n += n
        self.recent.extend(table.pending)

    def summary(self) -> dict[str, Any]:
        """``{"costed", "improved_squared_error", "decision_cost"}`` over all events."""
        return self._summary(self.n, self.sum_ise, self.sum_cost)

    def window_summary(self, table: _CostTable, added: int) -> dict[str, Any]:
        """The same over the recent window once the table's first ``added`` pending rows are added."""
        return self._summary(*table.tally(*table.window(added), [0.0, 0.0]))

    @staticmethod
    def _summary(n: int, ise: float, cost: float) -> dict[str, Any]:
        return {"costed": n, "improved_squared_error": ise / n if n else None, "decision_cost": cost / n if n else None}

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-able data (the costs included)."""
        return {"costs": self.costs.to_dict(), "n": self.n, "sum_ise": self.sum_ise, "sum_cost": self.sum_cost,
                "recent": [[_nan_to_none(a), _nan_to_none(b)] for a, b in self.recent.rows().tolist()]}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], window: int) -> CostScores:
        """Rebuild from :meth:`state` output."""
        c = cls(state["costs"], window)
        c.n = int(state["n"])
        c.sum_ise = float(state["sum_ise"])
        c.sum_cost = float(state["sum_cost"])
        c.recent.extend(np.array([[math.nan if a is None else float(a), math.nan if b is None else float(b)]
                                  for a, b in state["recent"]], dtype=np.float64).reshape(-1, 2))
        return c


class Prequential:
    """Running prequential metrics over all events and over a recent window.

    Parameters
    ----------
    window
        Number of most recent scored events in the windowed metrics.
    bins
        Number of equal-width confidence bins for the reliability diagram and the expected
        calibration error (ECE).
    history
        The metrics history (a default one if omitted).
    costs
        A cost matrix (decision to ``{label: cost}``, labels as JSON keys): the metrics then
        also hold ``costed``, ``improved_squared_error`` and ``decision_cost``
        (:class:`CostScores`). ``None``: no cost metrics.

    Notes
    -----
    ECE is :math:`\\sum_b \\frac{n_b}{n} |\\mathrm{acc}_b - \\mathrm{conf}_b|` over the bins of
    the top-label confidence. Events learned while the model had seen no label yet (its
    prediction is ``{}``) cannot be scored; they are counted in ``unscored``.
    """

    def __init__(self, window: int = 1000, bins: int = 10, history: History | None = None,
                 costs: Costs | CostMatrix | None = None) -> None:
        self.window = window
        self.bins = bins
        self.n = 0
        self.unscored = 0
        self.sum_log_loss = 0.0
        self.sum_brier = 0.0
        self.n_correct = 0
        self.bin_count = [0] * bins
        self.bin_conf = [0.0] * bins
        self.bin_correct = [0] * bins
        self.recent = _Ring(window, 4)  # score rows, columns LOG_LOSS .. CORRECT
        self.history = history if history is not None else History()
        self.costs = CostScores(costs, window) if costs is not None else None

    def update(self, proba: Mapping[ClassLabel, float], label: ClassLabel, t: float | None = None) -> None:
        """Score the prediction made for one event just before it was learned (``t``: its
        arrival time, the history's clock; ``proba`` empty: unscored)."""
        row, known, column, classes = _one_row(proba, label)
        self.update_many(row, known, column, times=[t], classes=classes)

    def update_many(self, proba: FloatArray, known: IntArray, label: IntArray,
                    times: Sequence[float | None] | None = None, classes: Sequence[ClassLabel] = ()) -> None:
        """Score a batch of predictions, each made just before its event was learned.

        Parameters
        ----------
        proba, known, label
            As :func:`scores` takes them, except that a row with ``known == 0`` (the model
            had seen no label yet) is counted as unscored.
        classes
            The class of each column (needed with ``costs``: a cost matrix names labels).
        times
            Each event's arrival time (Unix seconds, as logged; ``None`` where unknown), the
            history's clock. A history point taken at row ``i`` sees exactly the rows up to
            ``i``, so points do not depend on how events were batched.
        """
        times = [None] * len(known) if times is None else times
        if len(known) <= FEW and self.costs is None:
            self._update_few(proba, known, label, times)
            return
        scored = known > 0
        rows, costs = self._score(proba, known, label, scored, classes)
        windows: list[_Tables] = []  # with the window's rows: only if a point falls due

        def summaries(due: list[int]) -> list[dict[str, Any]]:
            windows.append(self._tables(rows, costs, window=True))
            upto = np.cumsum(scored)  # upto[i]: the scored rows among rows 0 .. i
            return [self._window_summary(windows[0], added) for added in upto[due].tolist()]

        self.history.observe_many(times, summaries)
        self.unscored += len(known) - len(rows)
        self._add(windows[0] if windows else self._tables(rows, costs, window=False))

    def _update_few(self, proba: FloatArray, known: IntArray, label: IntArray, times: Sequence[float | None]) -> None:
        """:meth:`update_many` for a few rows (at most :data:`FEW`) without cost metrics: each
        row scored (:func:`_score_row`) and added with Python floats, one at a time, in order,
        as the batch path adds them (the same sums, bit for bit); the window is read only where
        a history point falls due. Single learns come this way."""
        rows = [_score_row(p, k, y) for p, k, y in zip(proba.tolist(), known.tolist(), label.tolist(), strict=True)
                if k > 0]
        added = 0

        def add(until: int) -> None:
            nonlocal added
            bins, fresh = self.bins, rows[added:until]
            for log_loss, brier, conf, correct in fresh:
                b = min(int(conf * bins), bins - 1)
                self.sum_log_loss += log_loss
                self.sum_brier += brier
                self.bin_conf[b] += conf
                self.bin_count[b] += 1
                self.bin_correct[b] += int(correct)
                self.n_correct += int(correct)
            if fresh:
                self.recent.extend(np.array(fresh, dtype=np.float64))
            self.n += len(fresh)
            added = until

        def summaries(due: list[int]) -> list[dict[str, Any]]:
            upto = np.cumsum(known > 0).tolist()  # upto[i]: the scored rows among rows 0 .. i
            out = []
            for i in due:
                add(upto[i])
                out.append(self.recent_summary())
            return out

        self.history.observe_many(times, summaries)
        add(len(rows))
        self.unscored += len(known) - len(rows)

    def _score(self, proba: FloatArray, known: IntArray, label: IntArray, scored: BoolArray,
               classes: Sequence[ClassLabel]) -> tuple[FloatArray, FloatArray | None]:
        """The score rows of the batch's scored rows (:func:`scores`), and their cost score rows
        (:meth:`CostScores.scores`; ``None`` without cost metrics)."""
        if not scored.all():
            proba, known, label = proba[scored], known[scored], label[scored]
        if not len(known):
            return np.empty((0, 4)), None if self.costs is None else np.empty((0, 2))
        log_loss, brier, correct, conf = scores(proba, known, label)
        rows = np.empty((len(known), 4), dtype=np.float64)
        rows[:, LOG_LOSS], rows[:, BRIER], rows[:, CONFIDENCE], rows[:, CORRECT] = log_loss, brier, conf, correct
        costs = None if self.costs is None else np.column_stack(self.costs.scores(proba, known, label, classes))
        return rows, costs

    def _tables(self, rows: FloatArray, costs: FloatArray | None, window: bool) -> _Tables:
        """The window's rows (if ``window``), then the pending score rows ``rows`` and cost score
        rows ``costs``."""
        return _Tables(_ScoreTable(self.recent, rows, window, self.bins),
                       None if self.costs is None or costs is None else self.costs.table(costs, window))

    def _add(self, tables: _Tables) -> None:
        """Add the tables' pending rows to the running metrics and the window, row by row, in order."""
        table = tables.scores
        sums, counts, corrects = table.tally(table.first, len(table.rows),
                                             [self.sum_log_loss, self.sum_brier, *self.bin_conf])
        self.n += len(table.pending)
        self.sum_log_loss, self.sum_brier, *self.bin_conf = sums
        self.n_correct += sum(corrects)
        self.bin_count = [a + b for a, b in zip(self.bin_count, counts, strict=True)]
        self.bin_correct = [a + b for a, b in zip(self.bin_correct, corrects, strict=True)]
        self.recent.extend(table.pending)
        if self.costs is not None and tables.costs is not None:
            self.costs.add(tables.costs)

    def report(self) -> dict[str, Any]:
        """The metrics as JSON-able data: ``{"all": {...}, "recent": {...}}``."""
        every = self._summary(self.n, self.sum_log_loss, self.sum_brier, self.n_correct,
                              self.bin_count, self.bin_conf, self.bin_correct)
        return {
            "unscored": self.unscored,
            "all": every | (self.costs.summary() if self.costs is not None else {}),
            "recent": self.recent_summary() | {"window": self.window},
        }

    def recent_summary(self) -> dict[str, Any]:
        """The metrics of the recent window: ``n``, ``log_loss``, ..., ``reliability``."""
        return self._window_summary(self._tables(np.empty((0, 4)), np.empty((0, 2)), window=True), 0)

    def _window_summary(self, tables: _Tables, added: int) -> dict[str, Any]:
        """:meth:`recent_summary` once the first ``added`` pending rows of ``tables`` are added."""
        lo, hi = tables.scores.window(added)
        (log_loss, brier, *confs), counts, corrects = tables.scores.tally(lo, hi, [0.0] * (self.bins + 2))
        summary = self._summary(hi - lo, log_loss, brier, sum(corrects), counts, confs, corrects)
        if self.costs is None or tables.costs is None:
            return summary
        return summary | self.costs.window_summary(tables.costs, added)

    def _summary(self, n: int, ll: float, br: float, nc: int, counts: list[int],
                 confs: list[float], corrects: list[int]) -> dict[str, Any]:
        bins = []
        ece = 0.0
        for b in range(self.bins):
            c = counts[b]
            mean_conf = confs[b] / c if c else None
            acc = corrects[b] / c if c else None
            if c:
                ece += c / n * abs(corrects[b] / c - confs[b] / c)
            bins.append({"lower": b / self.bins, "upper": (b + 1) / self.bins, "count": c,
                         "mean_confidence": mean_conf, "accuracy": acc})
        return {
            "n": n,
            "log_loss": ll / n if n else None,
            "brier": br / n if n else None,
            "accuracy": nc / n if n else None,
            "ece": ece if n else None,
            "reliability": bins,
        }

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-able data."""
        return {
            "window": self.window, "bins": self.bins, "n": self.n, "unscored": self.unscored,
            "sum_log_loss": self.sum_log_loss, "sum_brier": self.sum_brier,
            # copies of the bins: a snapshot's state is encoded in a thread while learning goes on
            "n_correct": self.n_correct, "bin_count": list(self.bin_count),
            "bin_conf": list(self.bin_conf), "bin_correct": list(self.bin_correct),
            "recent": [[r[LOG_LOSS], r[BRIER], bool(r[CORRECT]), r[CONFIDENCE]] for r in self.recent.rows().tolist()],
            "history": self.history.state(),
        } | ({"costs": self.costs.state()} if self.costs is not None else {})

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Prequential:
        """Rebuild from :meth:`state` output."""
        # a snapshot from before the history existed starts a default one
        history = History.from_state(state["history"]) if "history" in state else None
        p = cls(window=int(state["window"]), bins=int(state["bins"]), history=history)
        p.n = int(state["n"])
        p.unscored = int(state["unscored"])
        p.sum_log_loss = float(state["sum_log_loss"])
        p.sum_brier = float(state["sum_brier"])
        p.n_correct = int(state["n_correct"])
        p.bin_count = [int(v) for v in state["bin_count"]]
        p.bin_conf = [float(v) for v in state["bin_conf"]]
        p.bin_correct = [int(v) for v in state["bin_correct"]]
        rows = np.array([[float(a), float(b), float(d), float(bool(c))] for a, b, c, d in state["recent"]],
                        dtype=np.float64)  # [log_loss, brier, correct, conf] as columns LOG_LOSS .. CORRECT
        p.recent.extend(rows.reshape(-1, 4))
        # a snapshot from before the cost metrics (or of a model without costs) has none
        p.costs = CostScores.from_state(state["costs"], p.window) if "costs" in state else None
        if history is None:
            p.history.seq = p.n + p.unscored  # its points start here; the events before have none
        return p
