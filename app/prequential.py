"""Prequential (test-then-train) evaluation of a stream of probabilistic predictions.

Before each labelled event is learned, the model's prediction for it is scored here. The
state is plain numbers so it is stored with each snapshot; replaying the same events from the
same state gives the same numbers, bit for bit.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

from app.history import History
from streamtree.typing import ClassLabel

__all__ = ["Prequential", "score"]

#: Probability floor for the log loss: an unseen true class would otherwise cost infinity.
EPS = 1e-15


def score(proba: Mapping[ClassLabel, float], label: ClassLabel) -> tuple[float, float, bool, float]:
    """Score one prediction against the true label.

    Parameters
    ----------
    proba
        Predicted distribution over the classes seen so far (non-empty).
    label
        The true label; it may be a class the model has not seen (probability 0).

    Returns
    -------
    tuple
        ``(log_loss, brier, correct, confidence)``.

    Notes
    -----
    With :math:`p_c` the predicted probability of class :math:`c` and :math:`y` the label:
    log loss :math:`-\\ln \\max(p_y, \\epsilon)` with :math:`\\epsilon = 10^{-15}`; Brier score
    :math:`\\sum_c (p_c - [c = y])^2` (multi-class form, in [0, 2]); ``correct`` is whether the
    most probable class (first in the model's class order on ties) is :math:`y`; ``confidence``
    is that class's probability, used by the reliability diagram.
    """
    p_true = proba.get(label, 0.0)
    log_loss = -math.log(max(p_true, EPS))
    brier = sum((p - (1.0 if c == label else 0.0)) ** 2 for c, p in proba.items())
    if label not in proba:
        brier += 1.0  # the unseen true class was predicted with probability 0
    top = max(proba, key=proba.__getitem__)
    return log_loss, brier, top == label, proba[top]


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
        Where the windowed metrics are sampled over time (:class:`~app.history.History`);
        a default one unless given.

    Notes
    -----
    ECE is :math:`\\sum_b \\frac{n_b}{n} |\\mathrm{acc}_b - \\mathrm{conf}_b|` over the bins of
    the top-label confidence. Events learned while the model had seen no label yet (its
    prediction is ``{}``) cannot be scored; they are counted in ``unscored``.
    """

    def __init__(self, window: int = 1000, bins: int = 10, history: History | None = None) -> None:
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

    def update(self, proba: Mapping[ClassLabel, float], label: ClassLabel, t: float | None = None) -> None:
        """Score the prediction made for an event just before it is learned.

        ``t`` is the event's arrival time (Unix seconds, as logged): the history's clock.
        """
        if proba:
            self._score(proba, label)
        else:
            self.unscored += 1
        self.history.observe(t, self.recent_summary)

    def _score(self, proba: Mapping[ClassLabel, float], label: ClassLabel) -> None:
        s = score(proba, label)
        log_loss, brier, correct, conf = s
        self.n += 1
        self.sum_log_loss += log_loss
        self.sum_brier += brier
        self.n_correct += correct
        b = self._bin(conf)
        self.bin_count[b] += 1
        self.bin_conf[b] += conf
        self.bin_correct[b] += correct
        self.recent.append(s)

    def _bin(self, conf: float) -> int:
        return min(int(conf * self.bins), self.bins - 1)

    def report(self) -> dict[str, Any]:
        """The metrics as JSON-able data: ``{"all": {...}, "recent": {...}}``."""
        return {
            "unscored": self.unscored,
            "all": self._summary(self.n, self.sum_log_loss, self.sum_brier, self.n_correct,
                                 self.bin_count, self.bin_conf, self.bin_correct),
            "recent": self.recent_summary() | {"window": self.window},
        }

    def recent_summary(self) -> dict[str, Any]:
        """The metrics of the recent window: ``n``, ``log_loss``, ..., ``reliability``."""
        counts = [0] * self.bins
        confs = [0.0] * self.bins
        corrects = [0] * self.bins
        ll = br = 0.0
        nc = 0
        bins, last = self.bins, self.bins - 1
        for log_loss, brier, correct, conf in self.recent:  # the history calls this often: _bin inlined
            ll += log_loss
            br += brier
            nc += correct
            b = int(conf * bins)
            if b > last:
                b = last
            counts[b] += 1
            confs[b] += conf
            corrects[b] += correct
        return self._summary(len(self.recent), ll, br, nc, counts, confs, corrects)

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
        }

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
        if history is None:
            p.history.seq = p.n + p.unscored  # its points start here; the events before have none
        return p
