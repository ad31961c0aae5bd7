"""Prequential (test-then-train) evaluation of a stream of probabilistic predictions.

Before each labelled event is learned, the model's prediction for it is scored here. The
state is plain numbers so it is stored with each snapshot. Scores are computed a batch at a
time, yet every number depends only on the events and their order, never on how they were
batched: each row is scored on its own and the running sums are added row by row, in order.
So replaying a log in pages gives the same numbers, bit for bit, as the live requests did.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

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
    p = np.where(seen, proba, 0.0)
    # math.log, not np.log: numpy's vectorised log may round a value differently by its
    # position in the array, and a row's score must not depend on its batch.
    log_loss = np.array([-math.log(max(v, EPS)) for v in p[rows, label].tolist()], dtype=np.float64)
    squares = np.where(seen, (p - (columns == label[:, None])) ** 2, 0.0)
    # accumulate adds left to right: class by class, as a sum over the prediction in class order
    brier = np.add.accumulate(squares, axis=1)[:, -1] + (label >= known)  # +1: the unseen true class had 0
    top = p.argmax(axis=1)
    return log_loss, brier, top == label, p[rows, top]


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


def _running_sum(start: float, values: FloatArray) -> float:
    """``start + values[0] + values[1] + ...`` added one at a time, left to right (not pairwise:
    the result must not depend on how a stream was cut into batches)."""
    if not values.size:
        return start
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


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
        self.recent: deque[tuple[float, float]] = deque(maxlen=window)

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

    def add(self, ise: FloatArray, cost: FloatArray) -> None:
        """Add the scores of consecutive rows (NaN: not costed), in order."""
        costed = ~np.isnan(ise)
        self.n += int(costed.sum())
        self.sum_ise = _running_sum(self.sum_ise, ise[costed])
        self.sum_cost = _running_sum(self.sum_cost, cost[costed])
        w = self.window
        self.recent.extend(zip(ise[-w:].tolist(), cost[-w:].tolist(), strict=True))

    def summary(self) -> dict[str, Any]:
        """``{"costed", "improved_squared_error", "decision_cost"}`` over all events."""
        return self._summary(self.n, self.sum_ise, self.sum_cost)

    def recent_summary(self) -> dict[str, Any]:
        """The same over the recent window."""
        recent = np.array(self.recent, dtype=np.float64).reshape(-1, 2)
        costed = recent[~np.isnan(recent[:, 0])]
        return self._summary(len(costed), _running_sum(0.0, costed[:, 0]), _running_sum(0.0, costed[:, 1]))

    @staticmethod
    def _summary(n: int, ise: float, cost: float) -> dict[str, Any]:
        return {"costed": n, "improved_squared_error": ise / n if n else None, "decision_cost": cost / n if n else None}

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-able data (the costs included)."""
        return {"costs": self.costs.to_dict(), "n": self.n, "sum_ise": self.sum_ise, "sum_cost": self.sum_cost,
                "recent": [[_nan_to_none(a), _nan_to_none(b)] for a, b in self.recent]}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], window: int) -> CostScores:
        """Rebuild from :meth:`state` output."""
        c = cls(state["costs"], window)
        c.n = int(state["n"])
        c.sum_ise = float(state["sum_ise"])
        c.sum_cost = float(state["sum_cost"])
        c.recent.extend((math.nan if a is None else float(a), math.nan if b is None else float(b))
                        for a, b in state["recent"])
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
        self.recent: deque[tuple[float, float, bool, float]] = deque(maxlen=window)
        self.history = history if history is not None else History()
        self.costs = CostScores(costs, window) if costs is not None else None

    def update(self, proba: Mapping[ClassLabel, float], label: ClassLabel, t: float | None = None) -> None:
        """Score the prediction made for one event just before it was learned (``t``: its
        arrival time, the history's clock)."""
        if not proba:
            self.unscored += 1
            self.history.observe(t, self.recent_summary)
            return
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
            ``i``: rows are scored lazily, up to the row where a point falls due, so points
            do not depend on how events were batched.
        """
        done = 0

        def window_at(i: int) -> Mapping[str, Any]:
            nonlocal done
            self._score_rows(proba[done : i + 1], known[done : i + 1], label[done : i + 1], classes)
            done = i + 1
            return self.recent_summary()

        for i, t in enumerate(times if times is not None else [None] * len(known)):
            self.history.observe(t, lambda i=i: window_at(i))  # type: ignore[misc]
        self._score_rows(proba[done:], known[done:], label[done:], classes)

    def _score_rows(self, proba: FloatArray, known: IntArray, label: IntArray, classes: Sequence[ClassLabel]) -> None:
        scored = known > 0
        n = int(scored.sum())
        self.unscored += len(known) - n
        if not n:
            return
        if n < len(known):
            proba, known, label = proba[scored], known[scored], label[scored]
        if self.costs is not None:
            self.costs.add(*self.costs.scores(proba, known, label, classes))
        log_loss, brier, correct, conf = scores(proba, known, label)
        self.n += n
        self.sum_log_loss = _running_sum(self.sum_log_loss, log_loss)
        self.sum_brier = _running_sum(self.sum_brier, brier)
        self.n_correct += int(np.count_nonzero(correct))
        counts, confs, corrects = self.bin_count, self.bin_conf, self.bin_correct
        for b, c, ok in zip(self._bins_of(conf).tolist(), conf.tolist(), correct.tolist(), strict=True):
            counts[b] += 1
            confs[b] += c  # row by row, in order: the same sum however the rows were batched
            corrects[b] += ok
        w = self.window
        self.recent.extend(zip(log_loss[-w:].tolist(), brier[-w:].tolist(), correct[-w:].tolist(),
                               conf[-w:].tolist(), strict=True))

    def _bins_of(self, conf: FloatArray) -> IntArray:
        return np.minimum((conf * self.bins).astype(np.int64), self.bins - 1)

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
        recent = np.array(self.recent, dtype=np.float64).reshape(-1, 4)
        log_loss, brier, conf = recent[:, 0], recent[:, 1], recent[:, 3]
        correct = recent[:, 2] > 0
        b = self._bins_of(conf)
        counts = np.bincount(b, minlength=self.bins).tolist()
        corrects = np.bincount(b[correct], minlength=self.bins).tolist()
        confs = [_running_sum(0.0, conf[b == j]) for j in range(self.bins)]
        summary = self._summary(len(self.recent), _running_sum(0.0, log_loss), _running_sum(0.0, brier),
                                int(correct.sum()), counts, confs, corrects)
        return summary | (self.costs.recent_summary() if self.costs is not None else {})

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
            "n_correct": self.n_correct, "bin_count": self.bin_count,
            "bin_conf": self.bin_conf, "bin_correct": self.bin_correct,
            "recent": [list(r) for r in self.recent],
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
        p.recent.extend((float(a), float(b), bool(c), float(d)) for a, b, c, d in state["recent"])
        # a snapshot from before the cost metrics (or of a model without costs) has none
        p.costs = CostScores.from_state(state["costs"], p.window) if "costs" in state else None
        if history is None:
            p.history.seq = p.n + p.unscored  # its points start here; the events before have none
        return p
