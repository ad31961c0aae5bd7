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
variance of the window). A drop is a detected change: the window then holds only values from
after it, and :attr:`Adwin.change` says which way the mean moved (a learner watching its own
error cares only about rises). This is MOA's ADWIN2, the detector in river's
``HoeffdingAdaptiveTreeClassifier``.

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
        # row i: totals and variances of its buckets of 2**i values, oldest first
        self._totals: list[list[float]] = [[]]
        self._variances: list[list[float]] = [[]]

    @property
    def mean(self) -> float:
        """Mean of the values in the current window."""
        return self.total / self.width if self.width else 0.0

    def update(self, value: float) -> bool:
        """Add ``value``; ``True`` when the window was cut because the stream changed."""
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
            if self._cut():
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

    def _cut(self) -> bool:
        """Drop old buckets while some split of the window has significantly different means."""
        cut = False
        while self.width > _MIN_PART:
            dd = math.log(2.0 * math.log(self.width) / self.delta)
            v = self.variance / self.width
            n0, u0 = 0, 0.0
            n1, u1 = self.width, self.total
            found = False
            for row in range(len(self._totals) - 1, -1, -1):
                size = 1 << row
                for j, total in enumerate(self._totals[row]):
                    n0 += size
                    n1 -= size
                    u0 += total
                    u1 -= total
                    if row == 0 and j == len(self._totals[0]) - 1:
                        break  # W1 would be empty
                    if n0 > _MIN_PART + 1 and n1 > _MIN_PART + 1:
                        m = 1.0 / (n0 - _MIN_PART + 1) + 1.0 / (n1 - _MIN_PART + 1)
                        eps = math.sqrt(2.0 * m * v * dd) + 2.0 / 3.0 * dd * m
                        if abs(u0 / n0 - u1 / n1) > eps:
                            found = True
                            if not cut:
                                self.change = u1 / n1 - u0 / n0
                            break
                if found:
                    break
            if not found:
                return cut
            cut = True
            self._drop_oldest()
        return cut

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
        cuts = np.cumsum(np.asarray(state["row_sizes"], dtype=np.int64))[:-1]
        detector._totals = [part.tolist() for part in np.split(np.asarray(state["totals"], dtype=np.float64), cuts)]
        detector._variances = [part.tolist() for part in np.split(np.asarray(state["variances"], dtype=np.float64), cuts)]
        return detector
