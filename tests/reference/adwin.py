"""ADWIN change detection with a state that the safe model format can store.

ADWIN (Bifet and Gavaldà, 2007, "Learning from time-changing data with adaptive windowing")
keeps a window ``W`` of the most recent values of a stream, compressed into an exponential
histogram: bucket row ``i`` holds up to ``max_buckets`` buckets of ``2**i`` values each, as
their total and variance. Every ``clock`` values it looks at every split of ``W`` into an
older part ``W0`` and a newer part ``W1`` (at bucket boundaries) and drops the oldest bucket
while some split has means that differ by more than

.. math::

    \\varepsilon = \\sqrt{2 m \\sigma^2_W d} + \\tfrac{2}{3} d m, \\qquad
    m = \\frac{1}{n_0 - \\ell + 1} + \\frac{1}{n_1 - \\ell + 1}, \\qquad
    d = \\ln \\frac{2 \\ln |W|}{\\delta}

(``n0``, ``n1`` the sizes of the two parts, ``ell`` the minimum part size, ``sigma^2_W`` the
variance of the window). A cut is a detected change: the window then holds only values from
after it, and :attr:`Adwin.change` says which way the mean moved (a learner watching its own
error cares only about rises). The test and its false-alarm bound are MOA's ADWIN2, the
detector in river's ``HoeffdingAdaptiveTreeClassifier``; two things differ, both so that one
change is reported once.

**Where the window is cut.** MOA drops the oldest bucket while *some* split is significant. It
stops as soon as the old values left are too few to be told apart, so a tail of them stays in
the window; as new values arrive the newer part's mean becomes purer, the tail is significant
again, and the same change is reported again (on 200 streams of errors rising from 10% to 50%:
one to six reports, three or four on most; river's ADWIN: one). Here each round drops the whole
older part of the *most* significant split, the one with the largest

.. math::

    \\frac{|\\hat\\mu_0 - \\hat\\mu_1|}{\\varepsilon(n_0, n_1)}
    \\;\\approx\\; \\frac{|\\hat\\mu_0 - \\hat\\mu_1|}{\\sqrt{2 \\sigma^2_W d}}
    \\sqrt{\\frac{n_0 n_1}{n_0 + n_1}},

which is, up to the ``ell`` shift and the ``2/3 d m`` term, the CUSUM statistic whose maximiser is
the classical estimate of where a mean shifted. Rounds repeat while any split is significant,
so after an update no split of the window is significant, as in ADWIN2. The test is unchanged
and so is everything until the first cut: the first alarm is MOA's and river's, and each check
keeps ADWIN2's false-alarm bound (it depends only on the window being tested).

**What is reported.** The estimate can land a bucket or two early, when the detection comes
only a few dozen values after the change, and the next check then cuts the rest of the old
values. A cut is reported (``True``, :attr:`Adwin.n_detections`, :attr:`Adwin.change`) unless
it drops only values that were in the window when the last change was reported and moves the
mean the same way; with ``t`` values seen, ``|W|`` kept and the last report at value
``t_d`` (:attr:`Adwin.detected_at`), a cut with change ``c`` is a new change when

.. math::

    t - |W| > t_d \\quad\\text{or}\\quad \\operatorname{sign} c \\ne \\operatorname{sign} c_d

(``t - |W|`` is the newest dropped value's index). Such a cut re-places the change already
reported; it still shrinks the window (the mean adapts) but is not a second alarm. A later
change drops values that arrived after the report, so it is reported, as is a change the other
way. River reaches one alarm per change differently: its ``ADWIN.update`` empties the whole
window after a detection, discarding the values after the change as well.

River's own ADWIN is a compiled object that cannot be saved without pickle; this one stores
plain numbers (:meth:`Adwin.to_state`), so a model's detector survives a restart exactly.

Examples
--------
>>> detector = Adwin(delta=0.002)
>>> stream = [0.1] * 1000 + [0.9] * 1000
>>> detected = [i for i, value in enumerate(stream) if detector.update(value)]
>>> 1000 < detected[0] < 1100
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["Adwin"]

_MIN_PART = 5  # the smallest W0 and W1 a cut may leave, as in MOA


class Adwin:
    """Adaptive-window change detector (ADWIN2) over a stream of bounded values.

    Parameters
    ----------
    delta
        Confidence: the probability of a false alarm on a stationary stream is about
        ``delta`` per check.
    clock
        Check for a cut every this many values.
    max_buckets
        Buckets per row of the exponential histogram (memory ``O(max_buckets log |W|)``).
    """

    def __init__(self, delta: float = 0.002, clock: int = 32, max_buckets: int = 5) -> None:
        self.delta = float(delta)
        self.clock = int(clock)
        self.max_buckets = int(max_buckets)
        self.width = 0
        self.total = 0.0
        self.variance = 0.0  # sum of squared deviations from the window mean
        self.time = 0
        self.n_detections = 0
        self.change = 0.0  # at the last detection: newer part's mean - older part's mean
        self.detected_at = 0  # ``time`` at the last detection (0: none)
        # row i: totals and variances of its buckets of 2**i values, oldest first
        self._totals: list[list[float]] = [[]]
        self._variances: list[list[float]] = [[]]

    @property
    def mean(self) -> float:
        """Mean of the values in the current window."""
        return self.total / self.width if self.width else 0.0

    def update(self, value: float) -> bool:
        """Add ``value``; ``True`` when a change was detected: the window was cut, and not only
        re-placing the change detected last (module docstring)."""
        self.width += 1
        if self.width > 1:
            diff = value - self.total / (self.width - 1)
            self.variance += (self.width - 1) * diff * diff / self.width
        self.total += value
        row = self._totals[0]
        row.append(float(value))
        self._variances[0].append(0.0)
        if len(row) > self.max_buckets:
            self._compress()
        self.time += 1
        if self.time % self.clock == 0 and self.width > _MIN_PART:
            cut, change = self._cut()
            # a cut of values all seen at the last detection, the same way, re-places that change
            new = self.time - self.width > self.detected_at or (change > 0.0) != (self.change > 0.0)
            if cut and new:
                self.change = change
                self.detected_at = self.time
                self.n_detections += 1
                return True
        return False

    def _compress(self) -> None:
        """Merge the two oldest buckets of every row that has one bucket too many."""
        totals, variances = self._totals, self._variances
        i = 0
        while len(totals[i]) > self.max_buckets:
            if i + 1 == len(totals):
                totals.append([])
                variances.append([])
            size = float(1 << i)
            t1, t2 = totals[i][0], totals[i][1]
            diff = (t1 - t2) / size
            totals[i + 1].append(t1 + t2)
            variances[i + 1].append(variances[i][0] + variances[i][1] + size * size * diff * diff / (2 * size))
            del totals[i][:2]
            del variances[i][:2]
            i += 1

    def _drop_oldest(self) -> int:
        """Forget the oldest bucket; returns how many values it held."""
        row = len(self._totals) - 1
        while not self._totals[row]:
            row -= 1
        size = 1 << row
        total = self._totals[row].pop(0)
        variance = self._variances[row].pop(0)
        self.width -= size
        self.total -= total
        if self.width:
            diff = total / size - self.total / self.width
            self.variance -= variance + size * self.width * diff * diff / (size + self.width)
        else:
            self.variance = 0.0
        self.variance = max(self.variance, 0.0)
        while len(self._totals) > 1 and not self._totals[-1]:
            self._totals.pop()
            self._variances.pop()
        return size

    def _split(self) -> tuple[int, float]:
        """The most significant split: ``(buckets in W0, newer mean - older mean)``, ``(0, 0.0)``
        when no split is significant. Among the splits with ``|u0/n0 - u1/n1| > eps``, the one
        with the largest ``|u0/n0 - u1/n1| / eps`` (the oldest on ties)."""
        dd = math.log(2.0 * math.log(self.width) / self.delta)
        v = self.variance / self.width
        n0, u0 = 0, 0.0
        n1, u1 = self.width, self.total
        buckets, best, best_score, change = 0, 0, 0.0, 0.0
        for row in range(len(self._totals) - 1, -1, -1):
            size = 1 << row
            for j, total in enumerate(self._totals[row]):
                n0 += size
                n1 -= size
                u0 += total
                u1 -= total
                buckets += 1
                if row == 0 and j == len(self._totals[0]) - 1:
                    break  # W1 would be empty
                if n0 > _MIN_PART + 1 and n1 > _MIN_PART + 1:
                    m = 1.0 / (n0 - _MIN_PART + 1) + 1.0 / (n1 - _MIN_PART + 1)
                    eps = math.sqrt(2.0 * m * v * dd) + 2.0 / 3.0 * dd * m
                    gap = abs(u0 / n0 - u1 / n1)
                    if gap > eps and gap / eps > best_score:
                        best, best_score, change = buckets, gap / eps, u1 / n1 - u0 / n0
        return best, change

    def _cut(self) -> tuple[bool, float]:
        """Drop the older part of the most significant split while there is one; whether the
        window was cut, and the change at the first cut."""
        cut, change = False, 0.0
        while self.width > _MIN_PART:
            buckets, split_change = self._split()
            if buckets == 0:
                break
            if not cut:
                cut, change = True, split_change
            for _ in range(buckets):
                self._drop_oldest()
        return cut, change

    # -- state --------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """Scalars and arrays that :meth:`from_state` turns back into this detector."""
        return {
            "delta": self.delta,
            "clock": self.clock,
            "max_buckets": self.max_buckets,
            "width": self.width,
            "total": self.total,
            "variance": self.variance,
            "time": self.time,
            "n_detections": self.n_detections,
            "change": self.change,
            "detected_at": self.detected_at,
            "row_sizes": np.array([len(row) for row in self._totals], dtype=np.int64),
            "totals": np.array([t for row in self._totals for t in row], dtype=np.float64),
            "variances": np.array([v for row in self._variances for v in row], dtype=np.float64),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Adwin:
        detector = cls(float(state["delta"]), int(state["clock"]), int(state["max_buckets"]))
        detector.width = int(state["width"])
        detector.total = float(state["total"])
        detector.variance = float(state["variance"])
        detector.time = int(state["time"])
        detector.n_detections = int(state["n_detections"])
        detector.change = float(state["change"])
        detector.detected_at = int(state.get("detected_at", 0))  # absent before it existed: none on record
        cuts = np.cumsum(np.asarray(state["row_sizes"], dtype=np.int64))[:-1]
        detector._totals = [part.tolist() for part in np.split(np.asarray(state["totals"], dtype=np.float64), cuts)]
        detector._variances = [
            part.tolist() for part in np.split(np.asarray(state["variances"], dtype=np.float64), cuts)
        ]
        return detector
