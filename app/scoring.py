"""Scoring probabilistic predictions against their labels, row by row: log loss, Brier score, top class.

Pure functions of the predictions and labels, used by the prequential metrics
(:mod:`app.prequential`). Each row is scored on its own, with the same operations in the same
order whatever the batch it comes in (and whether numpy or Python floats score it), so a
row's score never depends on how a stream was batched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from streamtree.typing import ClassLabel, FloatArray, IntArray

__all__ = ["BRIER", "CONFIDENCE", "CORRECT", "EPS", "LOG_LOSS", "BoolArray", "one_row", "score", "score_row", "scores"]

#: Probability floor for the log loss: an unseen true class would otherwise cost infinity.
EPS = 1e-15

BoolArray = npt.NDArray[np.bool_]

#: The columns of a score row (the rows of :class:`app.prequential.Prequential`'s window): the
#: three summed, then whether the prediction was right (1.0 or 0.0).
LOG_LOSS, BRIER, CONFIDENCE, CORRECT = range(4)


def scores(proba: FloatArray, known: IntArray, label: IntArray) -> tuple[FloatArray, FloatArray, BoolArray, FloatArray]:
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


def score_row(p: list[float], known: int, label: int) -> tuple[float, float, float, float]:
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


def one_row(
    proba: Mapping[ClassLabel, float], label: ClassLabel
) -> tuple[FloatArray, IntArray, IntArray, list[ClassLabel]]:
    """One prediction as :func:`scores` takes it, and its classes."""
    classes = list(proba) + ([] if label in proba else [label])
    row = np.array([[proba.get(c, 0.0) for c in classes]], dtype=np.float64)
    return row, np.array([len(proba)]), np.array([classes.index(label)]), classes


def score(proba: Mapping[ClassLabel, float], label: ClassLabel) -> tuple[float, float, bool, float]:
    """Score one prediction (a non-empty mapping of class to probability) against its label.

    Returns ``(log_loss, brier, correct, confidence)``; see :func:`scores`.
    """
    log_loss, brier, correct, conf = scores(*one_row(proba, label)[:3])
    return float(log_loss[0]), float(brier[0]), bool(correct[0]), float(conf[0])
