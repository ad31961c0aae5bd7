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

A row's scores are :mod:`app.scoring`'s; the window and the tallies of runs of rows are
:mod:`app.score_tables`'. This module keeps the running metrics, their summaries and their state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streamtree.decision import CostMatrix, Costs, decide_many
from streamtree.metrics import improved_squared_errors
from streamtree.typing import ClassLabel, FloatArray, IntArray

from .history import History
from .schemas import label_key
from .score_tables import CostTable, Ring, ScoreTable, Tables
from .scoring import BRIER, CONFIDENCE, CORRECT, LOG_LOSS, BoolArray, one_row, score_row, scores

__all__ = ["FEW", "CostScores", "Prequential"]


#: Batches of at most this many rows (and no cost metrics) are scored and added with Python
#: floats (:meth:`Prequential._update_few`): below it, numpy's fixed cost per call dominates
#: (measured: ``docs/decisions/request-path.md``).
FEW = 16


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
        self.recent = Ring(window, 2)  # (improved squared error, decision cost), NaN: not costed

    def scores(
        self, proba: FloatArray, known: IntArray, label: IntArray, classes: Sequence[ClassLabel]
    ) -> tuple[FloatArray, FloatArray]:
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

    def table(self, pending: FloatArray, window: bool) -> CostTable:
        """The window's rows (if ``window``), then ``pending`` ``(n, 2)`` rows as :meth:`scores`
        gives them."""
        return CostTable(self.recent, pending, window)

    def add(self, table: CostTable) -> None:
        """Add the table's pending rows, in order."""
        n, self.sum_ise, self.sum_cost = table.tally(table.first, len(table.rows), [self.sum_ise, self.sum_cost])
        self.n += n
        self.recent.extend(table.pending)

    def summary(self) -> dict[str, Any]:
        """``{"costed", "improved_squared_error", "decision_cost"}`` over all events."""
        return self._summary(self.n, self.sum_ise, self.sum_cost)

    def window_summary(self, table: CostTable, added: int) -> dict[str, Any]:
        """The same over the recent window once the table's first ``added`` pending rows are added."""
        return self._summary(*table.tally(*table.window(added), [0.0, 0.0]))

    @staticmethod
    def _summary(n: int, ise: float, cost: float) -> dict[str, Any]:
        return {"costed": n, "improved_squared_error": ise / n if n else None, "decision_cost": cost / n if n else None}

    def state(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-able data (the costs included)."""
        return {
            "costs": self.costs.to_dict(),
            "n": self.n,
            "sum_ise": self.sum_ise,
            "sum_cost": self.sum_cost,
            "recent": [[_nan_to_none(a), _nan_to_none(b)] for a, b in self.recent.rows().tolist()],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], window: int) -> CostScores:
        """Rebuild from :meth:`state` output."""
        c = cls(state["costs"], window)
        c.n = int(state["n"])
        c.sum_ise = float(state["sum_ise"])
        c.sum_cost = float(state["sum_cost"])
        c.recent.extend(
            np.array(
                [
                    [math.nan if a is None else float(a), math.nan if b is None else float(b)]
                    for a, b in state["recent"]
                ],
                dtype=np.float64,
            ).reshape(-1, 2)
        )
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

    def __init__(
        self,
        window: int = 1000,
        bins: int = 10,
        history: History | None = None,
        costs: Costs | CostMatrix | None = None,
    ) -> None:
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
        self.recent = Ring(window, 4)  # score rows, columns LOG_LOSS .. CORRECT
        self.history = history if history is not None else History()
        self.costs = CostScores(costs, window) if costs is not None else None

    def update(self, proba: Mapping[ClassLabel, float], label: ClassLabel, t: float | None = None) -> None:
        """Score the prediction made for one event just before it was learned (``t``: its
        arrival time, the history's clock; ``proba`` empty: unscored)."""
        row, known, column, classes = one_row(proba, label)
        self.update_many(row, known, column, times=[t], classes=classes)

    def update_many(
        self,
        proba: FloatArray,
        known: IntArray,
        label: IntArray,
        times: Sequence[float | None] | None = None,
        classes: Sequence[ClassLabel] = (),
    ) -> None:
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
        windows: list[Tables] = []  # with the window's rows: only if a point falls due

        def summaries(due: list[int]) -> list[dict[str, Any]]:
            windows.append(self._tables(rows, costs, window=True))
            upto = np.cumsum(scored)  # upto[i]: the scored rows among rows 0 .. i
            return [self._window_summary(windows[0], added) for added in upto[due].tolist()]

        self.history.observe_many(times, summaries)
        self.unscored += len(known) - len(rows)
        self._add(windows[0] if windows else self._tables(rows, costs, window=False))

    def _update_few(self, proba: FloatArray, known: IntArray, label: IntArray, times: Sequence[float | None]) -> None:
        """:meth:`update_many` for a few rows (at most :data:`FEW`) without cost metrics: each
        row scored (:func:`score_row`) and added with Python floats, one at a time, in order,
        as the batch path adds them (the same sums, bit for bit); the window is read only where
        a history point falls due. Single learns come this way."""
        rows = [
            score_row(p, k, y) for p, k, y in zip(proba.tolist(), known.tolist(), label.tolist(), strict=True) if k > 0
        ]
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

    def _score(
        self, proba: FloatArray, known: IntArray, label: IntArray, scored: BoolArray, classes: Sequence[ClassLabel]
    ) -> tuple[FloatArray, FloatArray | None]:
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

    def _tables(self, rows: FloatArray, costs: FloatArray | None, window: bool) -> Tables:
        """The window's rows (if ``window``), then the pending score rows ``rows`` and cost score
        rows ``costs``."""
        return Tables(
            ScoreTable(self.recent, rows, window, self.bins),
            None if self.costs is None or costs is None else self.costs.table(costs, window),
        )

    def _add(self, tables: Tables) -> None:
        """Add the tables' pending rows to the running metrics and the window, row by row, in order."""
        table = tables.scores
        sums, counts, corrects = table.tally(
            table.first, len(table.rows), [self.sum_log_loss, self.sum_brier, *self.bin_conf]
        )
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
        every = self._summary(
            self.n, self.sum_log_loss, self.sum_brier, self.n_correct, self.bin_count, self.bin_conf, self.bin_correct
        )
        return {
            "unscored": self.unscored,
            "all": every | (self.costs.summary() if self.costs is not None else {}),
            "recent": self.recent_summary() | {"window": self.window},
        }

    def recent_summary(self) -> dict[str, Any]:
        """The metrics of the recent window: ``n``, ``log_loss``, ..., ``reliability``."""
        return self._window_summary(self._tables(np.empty((0, 4)), np.empty((0, 2)), window=True), 0)

    def _window_summary(self, tables: Tables, added: int) -> dict[str, Any]:
        """:meth:`recent_summary` once the first ``added`` pending rows of ``tables`` are added."""
        lo, hi = tables.scores.window(added)
        (log_loss, brier, *confs), counts, corrects = tables.scores.tally(lo, hi, [0.0] * (self.bins + 2))
        summary = self._summary(hi - lo, log_loss, brier, sum(corrects), counts, confs, corrects)
        if self.costs is None or tables.costs is None:
            return summary
        return summary | self.costs.window_summary(tables.costs, added)

    def _summary(
        self, n: int, ll: float, br: float, nc: int, counts: list[int], confs: list[float], corrects: list[int]
    ) -> dict[str, Any]:
        bins = []
        ece = 0.0
        for b in range(self.bins):
            c = counts[b]
            mean_conf = confs[b] / c if c else None
            acc = corrects[b] / c if c else None
            if c:
                ece += c / n * abs(corrects[b] / c - confs[b] / c)
            bins.append(
                {
                    "lower": b / self.bins,
                    "upper": (b + 1) / self.bins,
                    "count": c,
                    "mean_confidence": mean_conf,
                    "accuracy": acc,
                }
            )
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
            "window": self.window,
            "bins": self.bins,
            "n": self.n,
            "unscored": self.unscored,
            "sum_log_loss": self.sum_log_loss,
            "sum_brier": self.sum_brier,
            # copies of the bins: a snapshot's state is encoded in a thread while learning goes on
            "n_correct": self.n_correct,
            "bin_count": list(self.bin_count),
            "bin_conf": list(self.bin_conf),
            "bin_correct": list(self.bin_correct),
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
        rows = np.array(
            [[float(a), float(b), float(d), float(bool(c))] for a, b, c, d in state["recent"]], dtype=np.float64
        )  # [log_loss, brier, correct, conf] as columns LOG_LOSS .. CORRECT
        p.recent.extend(rows.reshape(-1, 4))
        # a snapshot from before the cost metrics (or of a model without costs) has none
        p.costs = CostScores.from_state(state["costs"], p.window) if "costs" in state else None
        if history is None:
            p.history.seq = p.n + p.unscored  # its points start here; the events before have none
        return p
